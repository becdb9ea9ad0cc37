"""What each row says its attacker saw and knew (audit.rows.threat_columns)."""

from __future__ import annotations

from attacks.registry import get_attack
from audit.rows.threat_columns import attacker_sees, threat_columns


def _columns(attack: str, distance: str, variant: str) -> dict:
    return threat_columns(
        get_attack(attack).needs,
        distance=distance,
        variant=variant,
        reference_records=40,
        reference_models=4,
        models_trained="non-private Adam",
    )


def test_each_attack_says_what_of_the_release_it_read():
    assert attacker_sees(get_attack("reconstruction").needs) == "encoder and decoder"
    assert attacker_sees(get_attack("latent-search").needs) == "decoder only"
    assert attacker_sees(get_attack("monte-carlo").needs) == "samples only"
    assert attacker_sees(get_attack("domias").needs) == "samples only"


def test_side_knowledge_is_what_the_result_read():
    plain = _columns("reconstruction", "mse", "mean")
    assert (plain["side_reference_records"], plain["side_reference_models"]) == (0, 0)
    domias = _columns("domias", "pca-kde", "log-ratio")
    assert (domias["side_reference_records"], domias["side_reference_models"]) == (40, 0)
    pixel = _columns("monte-carlo", "pixel-l2", "share")
    assert pixel["side_reference_records"] == 0
    pca = _columns("monte-carlo", "pca-l2", "share")
    assert pca["side_reference_records"] == 40  # PCA fitted on reference records
    lira = _columns("likelihood", "iwae-bernoulli", "lira-offline")
    assert (lira["side_reference_records"], lira["side_reference_models"]) == (40, 4)
    assert lira["side_models_trained"] == "non-private Adam"
    assert _columns("likelihood", "iwae-bernoulli", "raw")["side_models_trained"] == ""


def test_nonprivate_variants_read_reference_models_too():
    labelled = _columns("latent-search", "mse", "calibrated-nonprivate")
    assert (labelled["side_reference_records"], labelled["side_reference_models"]) == (40, 4)
    assert _columns("likelihood", "iwae-bernoulli", "lira-offline-nonprivate")[
        "side_models_trained"
    ] == "non-private Adam"
