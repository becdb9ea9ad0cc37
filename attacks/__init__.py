"""Membership-inference attacks against VAEs, their distances, and their metrics."""

from attacks.attack import (
    Attack,
    AttackData,
    AttackResult,
    AttackSettings,
    Measure,
    ProgressFn,
    ResultKey,
    Variant,
)
from attacks.distances import Distance, available_distances, get_distance, mse, ssim
from attacks.domias import DomiasAttack
from attacks.latent_search import LatentSearchAttack
from attacks.likelihood import Likelihood, LikelihoodAttack
from attacks.metrics import (
    AttackMetrics,
    PrecisionRecallCurve,
    RocCurve,
    precision_recall_curve,
    roc_curve,
    tpr_at_fpr,
)
from attacks.monte_carlo import MonteCarloAttack
from attacks.reconstruction import ReconstructionAttack
from attacks.registry import available_attacks, build_attack, get_attack, register_attack
from attacks.threat import (
    Capability,
    LatentDecoder,
    LatentGenerativeModel,
    Records,
    Release,
    ReleaseKind,
    applicable,
    released_capabilities,
    require,
)
from attacks.worst_case import WorstCase, held_out_worst_case

__all__ = [
    "Attack",
    "AttackData",
    "AttackMetrics",
    "AttackResult",
    "AttackSettings",
    "Capability",
    "Distance",
    "DomiasAttack",
    "LatentDecoder",
    "LatentGenerativeModel",
    "LatentSearchAttack",
    "Likelihood",
    "LikelihoodAttack",
    "Measure",
    "MonteCarloAttack",
    "PrecisionRecallCurve",
    "ProgressFn",
    "ReconstructionAttack",
    "Records",
    "Release",
    "ReleaseKind",
    "ResultKey",
    "RocCurve",
    "Variant",
    "WorstCase",
    "applicable",
    "available_attacks",
    "available_distances",
    "build_attack",
    "get_attack",
    "get_distance",
    "held_out_worst_case",
    "mse",
    "precision_recall_curve",
    "register_attack",
    "released_capabilities",
    "require",
    "roc_curve",
    "ssim",
    "tpr_at_fpr",
]
