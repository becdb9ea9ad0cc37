"""The distance registry: lookup by name, orientation of scores, and what every distance shares
(both layouts, empty batches, shape checks, inputs left alone)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.distances import Distance, available_distances, get_distance, mse, ssim

from .reference import random_pairs


def test_empty_batch_gives_empty_result() -> None:
    empty = torch.zeros(0, 3, 8, 8)
    assert ssim(empty, empty).shape == (0,)
    assert mse(empty, empty).shape == (0,)


@pytest.mark.parametrize("distance", list(Distance))
def test_to_records_equals_pairwise_on_repeated_records(distance: Distance) -> None:
    recon, target = random_pairs(np.random.default_rng(8), (6, 1, 9, 9))
    recon_t, records = torch.from_numpy(recon), torch.from_numpy(target[::2])
    per_record = distance.to_records(recon_t.view(3, 2, 1, 9, 9), records)
    pairwise = distance.pairwise(recon_t, records.repeat_interleave(2, dim=0))
    np.testing.assert_allclose(per_record.flatten().numpy(), pairwise.numpy(), atol=1e-12)


@pytest.mark.parametrize("distance", list(Distance))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_distances_leave_their_inputs_alone(distance: Distance, dtype: torch.dtype) -> None:
    recon, target = (
        torch.from_numpy(a).to(dtype) for a in random_pairs(np.random.default_rng(9), (4, 1, 8, 8))
    )
    before = recon.clone(), target.clone()
    distance.pairwise(recon, target)
    distance.to_records(recon.view(2, 2, 1, 8, 8), target[::2])
    torch.testing.assert_close((recon, target), before, rtol=0, atol=0)


@pytest.mark.parametrize("distance", list(Distance))
def test_to_records_refuses_mismatched_shapes(distance: Distance) -> None:
    with pytest.raises(ValueError, match=r"recon must be \(R, S, \*shape\) for records"):
        distance.to_records(torch.zeros(2, 3, 1, 8, 8), torch.zeros(3, 1, 8, 8))
    with pytest.raises(ValueError, match=r"got recon \(2, 1, 8, 8\) and records \(2, 1, 8, 8\)"):
        distance.to_records(torch.zeros(2, 1, 8, 8), torch.zeros(2, 1, 8, 8))


@pytest.mark.parametrize("distance", [mse, ssim])
def test_distances_refuse_mismatched_shapes(distance) -> None:
    with pytest.raises(ValueError, match="same shape"):
        distance(torch.zeros(2, 1, 8, 8), torch.zeros(3, 1, 8, 8))


def test_get_distance_by_name_and_passthrough() -> None:
    assert get_distance("mse") is Distance.MSE
    assert get_distance("ssim") is Distance.SSIM
    assert get_distance(Distance.SSIM) is Distance.SSIM
    assert available_distances() == ["mse", "ssim"]


def test_get_distance_quotes_the_bad_name_and_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown distance 'l1'; valid distances: mse, ssim"):
        get_distance("l1")


def test_scores_are_higher_for_closer_reconstructions() -> None:
    means = np.array([0.1, 0.3])
    np.testing.assert_array_equal(Distance.MSE.score(means), [-0.1, -0.3])
    np.testing.assert_array_equal(Distance.SSIM.score(means), [0.1, 0.3])
