"""Membership-inference attacks against VAEs, their distances, and their metrics."""

from attacks.base import (
    Attack,
    AttackData,
    AttackResult,
    LatentGenerativeModel,
    ProgressFn,
)
from attacks.distances import Distance, available_distances, get_distance, mse, ssim
from attacks.metrics import (
    AttackMetrics,
    PrecisionRecallCurve,
    RocCurve,
    precision_recall_curve,
    roc_curve,
    tpr_at_fpr,
)
from attacks.reconstruction import ReconstructionAttack
from attacks.registry import available_attacks, get_attack, register_attack

__all__ = [
    "Attack",
    "AttackData",
    "AttackMetrics",
    "AttackResult",
    "Distance",
    "LatentGenerativeModel",
    "PrecisionRecallCurve",
    "ProgressFn",
    "ReconstructionAttack",
    "RocCurve",
    "available_attacks",
    "available_distances",
    "get_attack",
    "get_distance",
    "mse",
    "precision_recall_curve",
    "register_attack",
    "roc_curve",
    "ssim",
    "tpr_at_fpr",
]
