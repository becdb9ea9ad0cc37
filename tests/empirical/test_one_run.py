"""The one-run audit: guesses, the gradient-canary hook, and bounds against the claim."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.empirical.one_run import (
    Broken,
    CanaryKind,
    GradientCanaries,
    OneRunSettings,
    audit_one_run,
    count_correct,
)
from tests.empirical.fixtures import CTX, tiny_cell, tiny_data


def _naive_count(scores, included, k_plus, k_minus):
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    right = sum(bool(included[i]) for i in ranked[:k_plus])
    right += sum(not included[i] for i in ranked[len(ranked) - k_minus :])
    return k_plus + k_minus, right


@pytest.mark.parametrize(("k_plus", "k_minus"), [(1, 0), (0, 3), (5, 5), (10, 10)])
def test_count_correct_matches_a_loop(k_plus: int, k_minus: int) -> None:
    rng = np.random.default_rng(1)
    scores = rng.normal(size=20).round(1)  # ties on purpose
    included = rng.random(20) < 0.5
    assert count_correct(scores, included, k_plus=k_plus, k_minus=k_minus) == _naive_count(
        scores, included, k_plus, k_minus
    )


def test_settings_refuse_bad_guesses() -> None:
    with pytest.raises(ValueError, match="k_plus"):
        OneRunSettings(canaries=10, k_plus=8, k_minus=5)
    with pytest.raises(ValueError, match="canaries"):
        OneRunSettings(canaries=1)
    assert OneRunSettings(canaries=100).guesses == (25, 25)


def _hook(unclipped: bool = False) -> tuple[GradientCanaries, list[torch.nn.Parameter]]:
    params = [torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(5))]
    hook = GradientCanaries(
        params,
        included=np.array([True] * 6 + [False] * 4),
        sample_rate=1.0,
        raw_norm=50.0,
        seed=0,
        unclipped=unclipped,
    )
    return hook, params


def test_gradient_canaries_add_clipped_value_on_own_coordinates() -> None:
    hook, params = _hook()
    summed = [torch.zeros(3, 4), torch.zeros(5)]
    out = hook.add_canaries(summed, clip_norm=2.0)
    flat = torch.cat([g.reshape(-1) for g in out])
    coords = np.concatenate([[0], np.cumsum([12, 5])])[hook.param_of] + hook.offset
    assert len(set(coords.tolist())) == 10  # distinct coordinates
    expected = torch.zeros(17, dtype=torch.float64)
    expected[coords[:6]] = 2.0 * 50 / (50 + 1e-6)  # clipped to C, as clip_and_sum does
    assert torch.allclose(flat.double(), expected, atol=1e-6)
    assert summed[0].abs().sum() == 0  # the engine's sum is not modified in place
    hook.observe(out)
    assert np.allclose(hook.sums, expected[coords].numpy())


def test_gradient_canaries_unclipped_pass_raw_norm() -> None:
    hook, _ = _hook(unclipped=True)
    out = hook.add_canaries([torch.zeros(3, 4), torch.zeros(5)], clip_norm=float("inf"))
    assert float(torch.cat([g.reshape(-1) for g in out]).max()) == pytest.approx(50.0)


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_canary_bound_below_claim(seed: int) -> None:
    # the correct mechanism over repeated seeded runs (z = 3, claim 1.63 at delta = 1e-5)
    audit = audit_one_run(
        tiny_cell(seed=seed), tiny_data(), CTX, OneRunSettings(canaries=200, seed=seed)
    )
    assert audit.epsilon < audit.claim.epsilon == pytest.approx(1.629, abs=1e-3)
    assert audit.extra["parameter_move_epsilon"] < audit.claim.epsilon
    assert audit.bound.ceiling > audit.claim.epsilon  # the audit could have caught a bug


@pytest.mark.statistical
@pytest.mark.parametrize("broken", [Broken.NO_NOISE, Broken.NO_CLIP])
def test_gradient_canary_bound_exceeds_claim_of_broken_mechanism(broken: Broken) -> None:
    # seed 0: no-noise gives 2.32 (96 of 100 right), no-clip 2.50 (97 of 100) against 1.63
    audit = audit_one_run(
        tiny_cell(), tiny_data(), CTX, OneRunSettings(canaries=200, broken=broken)
    )
    assert audit.epsilon > audit.claim.epsilon


@pytest.mark.slow
def test_input_canary_bound_below_claim() -> None:
    audit = audit_one_run(
        tiny_cell(), tiny_data(), CTX, OneRunSettings(kind=CanaryKind.INPUT, canaries=100)
    )
    assert 0 <= audit.epsilon < audit.claim.epsilon
    assert audit.extra["n_train_with_canaries"] == 64 + int(audit.included.sum())


def test_one_run_refuses_other_mechanisms() -> None:
    from dataclasses import replace

    from audit.config import MechanismName

    cell = replace(tiny_cell(), mech=MechanismName.LDP)
    with pytest.raises(ValueError, match="cdp"):
        audit_one_run(cell, tiny_data(), CTX, OneRunSettings(canaries=10))


class _NoCanaries:
    unclipped = False

    def __init__(self) -> None:
        self.seen = 0

    def add_canaries(self, summed, *, clip_norm):
        return summed

    def observe(self, noisy) -> None:
        self.seen += 1


def test_an_empty_hook_leaves_training_bit_identical() -> None:
    from dataclasses import replace

    from audit.empirical.one_run import _fresh_model, _run_settings
    from audit.mechanisms.mechanism import Prepared
    from models.dp import train_dp_vae

    cell, data = tiny_cell(), tiny_data()
    cell = replace(cell, profile=replace(cell.profile, epochs=1))
    states = []
    for hook in (None, _NoCanaries()):
        _, model = _fresh_model(cell, data, CTX)
        settings, dp, _ = _run_settings(
            cell, Prepared(data.train, data.val), model, CTX, Broken.NONE
        )
        history = train_dp_vae(model, data.train, data.val, settings, dp, audit_hook=hook)
        states.append(model.state_dict())
    assert hook.seen == history.dp.steps == 4
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
