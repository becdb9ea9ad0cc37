"""Audit a release made outside the suite (a decoder, a whole VAE, or synthetic records) with
the sweep's attacks, worst case, rows and report, plus the DCR baseline
(``benchmark.py attack``; :func:`audit_arrays` from Python)."""

from audit.release.auditing import ReleaseAudit, ReleaseAuditConfig, audit_arrays, audit_release
from audit.release.entry_points import ExternalModel, load_model
from audit.release.record_sets import AuditRecords, RecordSet, Role, read_records

__all__ = [
    "AuditRecords",
    "ExternalModel",
    "RecordSet",
    "ReleaseAudit",
    "ReleaseAuditConfig",
    "Role",
    "audit_arrays",
    "audit_release",
    "load_model",
    "read_records",
]
