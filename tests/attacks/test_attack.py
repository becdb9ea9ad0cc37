"""Attack data and result objects: validation at the boundary, rows, the model protocol."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.attack import AttackData, AttackResult, Measure, Variant
from attacks.distances import Distance
from attacks.threat import LatentGenerativeModel
from models.vae import ConditionalConvVAE


def make_data(n: int = 4, **overrides: object) -> AttackData:
    fields = {
        "x": torch.zeros(n, 1, 8, 8),
        "y": torch.zeros(n, dtype=torch.int64),
        "is_member": np.arange(n) % 2 == 0,
    }
    fields.update(overrides)
    return AttackData(**fields)


def test_valid_data() -> None:
    assert make_data(6).n_records == 6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"y": torch.zeros(3, dtype=torch.int64)}, r"y must be an int64 tensor of shape \(4,\)"),
        ({"y": torch.zeros(4, dtype=torch.int32)}, "torch.int32"),
        ({"is_member": np.array([True, False, True])}, r"shape \(4,\) to match"),
        ({"is_member": np.array([1, 0, 1, 0])}, "boolean numpy array"),
        ({"is_member": np.ones(4, dtype=bool)}, "4 members and 0 non-members"),
        ({"is_member": np.zeros(4, dtype=bool)}, "0 members and 4 non-members"),
        ({"x": torch.zeros(4, dtype=torch.int64)}, "floating tensor"),
    ],
)
def test_bad_data_is_refused(overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_data(4, **overrides)


def test_nan_in_records_is_refused() -> None:
    x = torch.zeros(4, 1, 8, 8)
    x[2, 0, 3, 3] = float("nan")
    x[1, 0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="x must be finite, got 2 NaN or infinite"):
        make_data(4, x=x)


def make_result(**overrides: object) -> AttackResult:
    fields = {
        "attack": "reconstruction",
        "distance": Distance.MSE,
        "scores": np.array([0.9, 0.8, 0.7, 0.6]),
        "is_member": np.array([True, False, True, False]),
        "n_samples": 300,
    }
    fields.update(overrides)
    return AttackResult(**fields)


def test_result_row_carries_config_and_metrics() -> None:
    row = make_result().to_row()
    assert row["attack"] == "reconstruction" and row["distance"] == "mse"
    assert (row["attack_samples"], row["attack_members"], row["attack_nonmembers"]) == (300, 2, 2)
    assert row["mi_ap"] == pytest.approx(5 / 6) and row["mi_auc"] == pytest.approx(3 / 4)
    assert {"tpr_at_fpr_1pct", "tpr_at_fpr_01pct"} <= row.keys()


def test_row_of_a_non_reconstruction_attack_names_measure_and_variant() -> None:
    row = make_result(attack="monte-carlo", distance=Measure.PCA_L2, variant=Variant.SHARE).to_row()
    assert (row["attack"], row["distance"], row["variant"]) == ("monte-carlo", "pca-l2", "share")
    assert list(row)[:3] == ["attack", "distance", "variant"]
    assert make_result().to_row()["variant"] == "mean"  # the reconstruction attack's default


def test_result_curves() -> None:
    result = make_result()
    assert result.roc_curve().tpr[-1] == 1.0
    assert result.precision_recall_curve().recall[0] == 1.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"scores": np.zeros(3)}, r"shape \(3,\) to match"),
        ({"scores": [0.1, 0.2, 0.3, 0.4]}, "1-D numpy array"),
        ({"distance": "mse"}, "distance must be a Distance or a Measure"),
        ({"variant": "share"}, "variant must be a Variant, got 'share'"),
        ({"n_samples": 0}, "n_samples must be at least 1, got 0"),
    ],
)
def test_bad_result_is_refused(overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_result(**overrides)


def test_conditional_conv_vae_satisfies_the_protocol() -> None:
    vae = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=2, latent_dim=4)
    assert isinstance(vae, LatentGenerativeModel)
