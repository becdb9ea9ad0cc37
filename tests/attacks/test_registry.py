"""The attack registry: lookup, listing, and refusing silent replacement."""

from __future__ import annotations

import pytest

from attacks.reconstruction import ReconstructionAttack
from attacks.registry import available_attacks, get_attack, register_attack


def test_reconstruction_is_registered() -> None:
    assert get_attack("reconstruction") is ReconstructionAttack
    assert "reconstruction" in available_attacks()


def test_all_five_attacks_are_registered_under_their_names() -> None:
    assert available_attacks() == [
        "domias",
        "latent-search",
        "likelihood",
        "monte-carlo",
        "reconstruction",
    ]
    for name in available_attacks():
        assert get_attack(name).name == name


def test_unknown_attack_quotes_the_name_and_lists_valid_ones() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown attack 'gan-leaks'; valid attacks: domias, latent-search, likelihood, "
        r"monte-carlo, reconstruction",
    ):
        get_attack("gan-leaks")


def test_registering_a_different_class_under_a_taken_name_is_refused() -> None:
    class Impostor(ReconstructionAttack):
        pass

    register_attack(ReconstructionAttack)  # re-registering the same class is a no-op
    with pytest.raises(ValueError, match="already registered .*overwrite=True"):
        register_attack(Impostor)
    assert get_attack("reconstruction") is ReconstructionAttack


def test_every_registered_attack_is_built_by_one_function_from_profile_settings() -> None:
    from attacks.attack import AttackSettings
    from attacks.distances import Distance
    from attacks.registry import build_attack

    settings = AttackSettings(attack_samples=7, distances=("mse", "ssim"))
    assert settings.distances == (Distance.MSE, Distance.SSIM)
    for name in available_attacks():
        attack = build_attack(name, seed=3, device="cpu", settings=settings)
        assert isinstance(attack, get_attack(name)) and attack.seed == 3
    recon = build_attack("reconstruction", seed=3, device="cpu", settings=settings)
    assert recon == ReconstructionAttack(seed=3, n_samples=7, distances=("mse", "ssim"))
    with pytest.raises(ValueError, match="unknown attack 'gan-leaks'"):
        build_attack("gan-leaks", seed=3, device="cpu", settings=settings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attack_samples": 0, "distances": ("mse",)}, "attack_samples must be a positive"),
        ({"attack_samples": 2, "distances": ()}, "distances must be a non-empty sequence"),
        ({"attack_samples": 2, "distances": "mse"}, "distances must be a non-empty sequence"),
    ],
)
def test_attack_settings_are_validated(kwargs, message) -> None:
    from attacks.attack import AttackSettings

    with pytest.raises(ValueError, match=message):
        AttackSettings(**kwargs)
