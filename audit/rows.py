"""The columns of ``runs.csv``: one row per (dataset, mechanism, parameter, seed, distance)."""

from __future__ import annotations

COLUMNS: tuple[str, ...] = (
    "dataset", "mech", "param_name", "param_value", "seed", "distance", "profile",
    "mi_ap", "mi_auc", "tpr_at_fpr_1pct", "tpr_at_fpr_01pct",
    "acc", "acc_base", "acc_real", "train_test_gap",
    "epsilon", "delta", "epsilon_method", "accountant", "privacy_notes",
    "phi", "epochs", "batch_size", "lr", "latent_dim", "n_train", "n_attack", "attack_samples",
    "clip_norm", "wall_s", "config_hash", "code_version",
)
