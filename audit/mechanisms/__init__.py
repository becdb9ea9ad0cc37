"""Mechanism registry: one object per MechanismName; lookups list the valid names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from audit.config import RUN_OPTIONS, CellConfig, MechanismName, Profile, check_cache_schema
from audit.mechanisms.cdp import CentralDP
from audit.mechanisms.cdp_termwise import TermwiseDP
from audit.mechanisms.dp2vae import Dp2Vae
from audit.mechanisms.ldp import LocalDP
from audit.mechanisms.mechanism import CellData, Context, DataFacts, Mechanism, Prepared, Trained
from audit.mechanisms.none import NoPrivacy
from audit.mechanisms.vae_ldp import VaeLdp
from audit.options import MechanismOptions, flag
from dpvae_core.validation import parse_enum

_REGISTRY: dict[MechanismName, Mechanism] = {}


def register(mechanism: Mechanism) -> Mechanism:
    _REGISTRY[mechanism.name] = mechanism
    return mechanism


def get_mechanism(name: MechanismName | str) -> Mechanism:
    key = name if isinstance(name, MechanismName) else parse_enum(MechanismName, name, "mechanism")
    if key not in _REGISTRY:
        available = ", ".join(m.value for m in _REGISTRY)
        raise ValueError(f"mechanism {key.value!r} is not implemented yet; available: {available}")
    return _REGISTRY[key]


def available_mechanisms() -> list[MechanismName]:
    return list(_REGISTRY)


def declared_options() -> dict[str, type[MechanismOptions]]:
    """{mechanism name: its options type} of every registered mechanism, for the flags."""
    return {name.value: mech.options_type for name, mech in _REGISTRY.items()}


def build_options(
    mechs: Iterable[MechanismName], given: Mapping[str, Any]
) -> tuple[tuple[MechanismName, MechanismOptions], ...]:
    """Each selected private mechanism's typed options from the options given by name.

    ``given``: {option name: value} (None values are not given). An option that no selected
    mechanism reads is refused with a ValueError naming the mechanisms that would read it; a
    bad value with the ValueError of its parser (which quotes it).
    """
    given = {k: v for k, v in given.items() if v is not None}
    private = [m for m in mechs if m is not MechanismName.NONE]
    names = ", ".join(m.value for m in private) or "none"
    for key in given:
        if not any(key in get_mechanism(m).options_type.names() for m in private):
            owners = [m.value for m in _REGISTRY if key in _REGISTRY[m].options_type.names()]
            if not owners:
                raise ValueError(f"unknown mechanism option {key!r}")
            raise ValueError(
                f"{flag(key)} does not apply to --mech {names} (it is read by "
                f"{', '.join(owners)}); drop it or add a mechanism that reads it"
            )
    built = []
    for m in private:
        options_type = get_mechanism(m).options_type
        mine = {k: v for k, v in given.items() if k in options_type.names()}
        built.append((m, options_type.from_mapping(mine)))
    return tuple(built)


def make_cell(
    dataset: str,
    mech: MechanismName | str,
    param_name: str,
    param_value: float | None,
    seed: int,
    profile: Profile,
    options: Mapping[str, Any] | None = None,
) -> CellConfig:
    """A cell whose ``options`` mapping holds run facts (:data:`RUN_OPTIONS`) and the
    mechanism's options by name, split and typed here (None values are not given)."""
    mech = mech if isinstance(mech, MechanismName) else parse_enum(MechanismName, mech, "mechanism")
    given = {k: v for k, v in (options or {}).items() if v is not None}
    run = tuple((k, given.pop(k)) for k in RUN_OPTIONS if k in given)
    return CellConfig(
        dataset=dataset,
        mech=mech,
        param_name=param_name,
        param_value=param_value,
        seed=int(seed),
        profile=profile,
        options=run,
        mech_options=get_mechanism(mech).options_type.from_mapping(given) if given else None,
    )


def cell_from_canonical(body: Mapping[str, Any]) -> CellConfig:
    """The :class:`CellConfig` whose :meth:`~CellConfig.canonical` is ``body`` (a cell's
    ``config.json``): its options split into run facts and the mechanism's typed options, its
    attack list. A config of another cache schema is refused (:func:`check_cache_schema`)."""
    check_cache_schema(body, "a cell config")
    cell = make_cell(
        body["dataset"],
        body["mech"],
        body["param_name"],
        body["param_value"],
        body["seed"],
        Profile(**body["profile"]),
        body.get("options", {}),
    )
    given = {k: body[k] for k in ("attacks", "audit") if k in body}  # else at their defaults
    if "attacks" in given:
        given["attacks"] = tuple(given["attacks"])
    return replace(cell, **given)


register(NoPrivacy())
register(CentralDP())
register(TermwiseDP())
register(LocalDP())
register(VaeLdp())
register(Dp2Vae())

__all__ = [
    "CellData",
    "Context",
    "DataFacts",
    "Mechanism",
    "Prepared",
    "Trained",
    "available_mechanisms",
    "build_options",
    "cell_from_canonical",
    "declared_options",
    "get_mechanism",
    "make_cell",
    "register",
]
