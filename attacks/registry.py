"""The attack registry: names to :class:`~attacks.attack.Attack` classes (one module per attack).

The registry is where every reader learns the attacks: their names (:func:`available_attacks`),
the sweep's attack list (:func:`sweep_attacks`, from each attack's ``in_sweep``, in the order
below), and each attack's threat (its class's ``needs`` and ``uses``). Adding an attack is its
module and one entry in :data:`_ATTACKS`' list.
"""

from __future__ import annotations

import torch

from attacks.attack import Attack, AttackSettings
from attacks.domias import DomiasAttack
from attacks.latent_search import LatentSearchAttack
from attacks.likelihood import LikelihoodAttack
from attacks.monte_carlo import MonteCarloAttack
from attacks.reconstruction import ReconstructionAttack

_ATTACKS: dict[str, type[Attack]] = {
    attack.name: attack
    for attack in (
        ReconstructionAttack,
        MonteCarloAttack,
        LatentSearchAttack,
        LikelihoodAttack,
        DomiasAttack,
    )
}


def available_attacks() -> list[str]:
    """Names accepted by :func:`get_attack`, sorted."""
    return sorted(_ATTACKS)


def sweep_attacks() -> tuple[str, ...]:
    """The sweep's attack list, in the order cells run them: every registered attack whose
    ``in_sweep`` is set, in registration order (the paper's reconstruction attack first)."""
    return tuple(name for name, attack in _ATTACKS.items() if attack.in_sweep)


def get_attack(name: str) -> type[Attack]:
    """The attack class registered under ``name`` (e.g. ``"reconstruction"``)."""
    try:
        return _ATTACKS[name]
    except KeyError:
        raise ValueError(
            f"unknown attack {name!r}; valid attacks: {', '.join(available_attacks())}"
        ) from None


def register_attack(attack: type[Attack], *, overwrite: bool = False) -> None:
    """Register ``attack`` under its ``name``; refuses to replace an existing one unless asked."""
    if attack.name in _ATTACKS and _ATTACKS[attack.name] is not attack and not overwrite:
        raise ValueError(
            f"an attack named {attack.name!r} is already registered "
            f"({_ATTACKS[attack.name].__name__}); pass overwrite=True to replace it"
        )
    _ATTACKS[attack.name] = attack


def unregister_attack(name: str) -> None:
    """Remove the attack registered under ``name`` (a test's throwaway attack); a ValueError
    where none is."""
    get_attack(name)
    del _ATTACKS[name]


def build_attack(
    name: str, *, seed: int, device: torch.device | str, settings: AttackSettings
) -> Attack:
    """The attack registered under ``name``, built from a profile's ``settings``
    (:meth:`Attack.from_settings`); ``seed`` roots its randomness."""
    return get_attack(name).from_settings(settings, seed=seed, device=device)
