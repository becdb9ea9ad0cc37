"""What each row assumes of its attacker: what it saw of the release and its side knowledge.

``attacker_sees`` comes from the attack's needs (:mod:`attacks.threat`); the side knowledge from
how the result was formed: calibrated and LiRA variants read reference models (trained on
reference records, by the cell's mechanism or, for the ``-nonprivate`` variants, without it:
``side_models_trained`` says which), DOMIAS and the PCA measures read reference records, the
rest neither.
"""

from __future__ import annotations

from collections.abc import Iterable

from attacks.attack import NONPRIVATE_VARIANTS, Measure, Variant
from attacks.threat import Capability

SEES: dict[frozenset[Capability], str] = {
    frozenset({Capability.ENCODER, Capability.DECODER}): "encoder and decoder",
    frozenset({Capability.DECODER}): "decoder only",
    frozenset({Capability.SAMPLES}): "samples only",
}
MODEL_VARIANTS = frozenset(
    v.value for v in (Variant.CALIBRATED, Variant.LIRA, *NONPRIVATE_VARIANTS.values())
)
RECORD_MEASURES = frozenset({Measure.PCA_L2.value, Measure.PCA_KDE.value})


def attacker_sees(needs: Iterable[Capability]) -> str:
    """What of the release an attack needing ``needs`` reads (reference knowledge aside)."""
    released = frozenset(needs) - {Capability.REFERENCE_RECORDS, Capability.REFERENCE_MODELS}
    return SEES.get(released, ", ".join(sorted(c.value for c in released)) or "nothing")


def threat_columns(
    needs: Iterable[Capability],
    *,
    distance: str,
    variant: str,
    reference_records: int,
    reference_models: int,
    models_trained: str,
) -> dict[str, object]:
    """``attacker_sees``, ``side_reference_records``, ``side_reference_models`` and
    ``side_models_trained`` (how the reference models were trained; empty where none are
    read) of one result of an attack needing ``needs``."""
    needs = frozenset(needs)
    uses_models = variant in MODEL_VARIANTS and reference_models > 0
    uses_records = (
        uses_models or Capability.REFERENCE_RECORDS in needs or distance in RECORD_MEASURES
    )
    return {
        "attacker_sees": attacker_sees(needs),
        "side_reference_records": reference_records if uses_records else 0,
        "side_reference_models": reference_models if uses_models else 0,
        "side_models_trained": models_trained if uses_models else "",
    }
