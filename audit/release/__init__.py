"""Attack a release made outside the suite (a decoder, a whole VAE, or synthetic records) with
the sweep's attacks, worst case, rows and report, plus the DCR baseline
(``benchmark.py attack``; :func:`attack_arrays` from Python)."""

from audit.release.entry_points import ExternalModel, load_model
from audit.release.record_sets import RecordSet, ReleaseRecords, Role, read_records
from audit.release.release_attack import attack_arrays, attack_release
from audit.release.release_config import ReleaseAttackConfig
from audit.release.release_result import ReleaseAttack

__all__ = [
    "ReleaseRecords",
    "ExternalModel",
    "RecordSet",
    "ReleaseAttack",
    "ReleaseAttackConfig",
    "Role",
    "attack_arrays",
    "attack_release",
    "load_model",
    "read_records",
]
