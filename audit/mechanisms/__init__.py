"""The mechanism registry: one object per mechanism, keyed by the name its class declares.

The registry is where every reader learns the mechanisms: their names (:func:`available_mechanisms`,
:data:`BASELINE`), and through :func:`get_mechanism` what each owns (its parameter, grid, labels,
options, release and audits; :class:`~audit.mechanisms.mechanism.Mechanism`). Adding a mechanism is
its module and one :func:`register` line below.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from audit.config import RUN_OPTIONS, CellConfig, check_cache_schema, declare_dp_arithmetic
from audit.mechanisms.cdp import CentralDP
from audit.mechanisms.cdp_termwise import TermwiseDP
from audit.mechanisms.dp2vae import Dp2Vae
from audit.mechanisms.ldp import LocalDP
from audit.mechanisms.mechanism import CellData, Context, DataFacts, Mechanism, Prepared, Trained
from audit.mechanisms.none import NoPrivacy
from audit.mechanisms.vae_ldp import VaeLdp
from audit.options import MechanismOptions, flag
from audit.profiles import Profile

_REGISTRY: dict[str, Mechanism] = {}

BASELINE: str = NoPrivacy.name
"""The non-private reference mechanism's name: every sweep's baseline cells, the report's and the
gate's reference rows (its ``param_value`` is empty)."""


def register(mechanism: Mechanism) -> Mechanism:
    """Register ``mechanism`` under its class's ``name`` (a name taken already is refused)."""
    name = mechanism.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"a mechanism's name must be a non-empty string, got {name!r}")
    if name in _REGISTRY and _REGISTRY[name] is not mechanism:
        raise ValueError(
            f"a mechanism named {name!r} is already registered ({type(_REGISTRY[name]).__name__})"
        )
    _REGISTRY[name] = mechanism
    declare_dp_arithmetic(name, mechanism.dp_arithmetic)
    return mechanism


def unregister(name: str) -> None:
    """Remove the mechanism registered under ``name`` (a test's throwaway mechanism); the
    baseline stays."""
    get_mechanism(name)
    if name == BASELINE:
        raise ValueError(f"the baseline {BASELINE!r} cannot be unregistered")
    del _REGISTRY[name]
    declare_dp_arithmetic(name, None)


def get_mechanism(name: str) -> Mechanism:
    """The mechanism registered under ``name``; a ValueError that lists the registered names."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(
            f"unknown mechanism {name!r}; choose one of: {', '.join(available_mechanisms())}"
        )
    return _REGISTRY[name]


def find_mechanism(name: object) -> Mechanism | None:
    """The mechanism registered under ``name``, or None (a row of a release or an older run)."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def parse_mechanism(name: object) -> str:
    """``name`` if a mechanism is registered under it (a ValueError that lists them otherwise)."""
    return get_mechanism(name).name  # type: ignore[arg-type]  # get_mechanism refuses non-str


def available_mechanisms() -> list[str]:
    """The registered mechanisms' names, in registration order (the baseline first): the order
    of ``--mech`` choices, the report's colours and its tables."""
    return list(_REGISTRY)


def private_mechanisms() -> list[str]:
    """:func:`available_mechanisms` without the :data:`BASELINE`."""
    return [name for name in _REGISTRY if name != BASELINE]


def by_param_label(names: Iterable[str]) -> dict[str, list[str]]:
    """The mechanisms ``names`` grouped by their parameter's label (``noise multiplier z``: cdp,
    cdp-termwise, ...), in order: what a help text says the grid values are."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(get_mechanism(name).param_label, []).append(name)
    return groups


def param_symbol(param_name: str) -> str:
    """A grid parameter's symbol in a setting's label (``z`` of ``z=0.5``): the ``param_symbol``
    of the mechanisms whose parameter it is, else ``param_name`` itself (``target_epsilon``)."""
    for mechanism in _REGISTRY.values():
        if mechanism.param_name == param_name and mechanism.param_symbol:
            return mechanism.param_symbol
    return param_name


def declared_options() -> dict[str, type[MechanismOptions]]:
    """{mechanism name: its options type} of every registered mechanism, for the flags."""
    return {name: mech.options_type for name, mech in _REGISTRY.items()}


def build_options(
    mechs: Iterable[str], given: Mapping[str, Any]
) -> tuple[tuple[str, MechanismOptions], ...]:
    """Each selected private mechanism's typed options from the options given by name.

    ``given``: {option name: value} (None values are not given). An option that no selected
    mechanism reads is refused with a ValueError naming the mechanisms that would read it; a
    bad value with the ValueError of its parser (which quotes it).
    """
    given = {k: v for k, v in given.items() if v is not None}
    private = [m for m in mechs if m != BASELINE]
    names = ", ".join(private) or BASELINE
    for key in given:
        if not any(key in get_mechanism(m).options_type.names() for m in private):
            owners = [m for m in _REGISTRY if key in _REGISTRY[m].options_type.names()]
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
    mech: str,
    param_name: str,
    param_value: float | None,
    seed: int,
    profile: Profile,
    options: Mapping[str, Any] | None = None,
) -> CellConfig:
    """A cell whose ``options`` mapping holds run facts (:data:`RUN_OPTIONS`) and the
    mechanism's options by name, split and typed here (None values are not given)."""
    mech = parse_mechanism(mech)
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
    "BASELINE",
    "available_mechanisms",
    "by_param_label",
    "build_options",
    "cell_from_canonical",
    "declared_options",
    "find_mechanism",
    "get_mechanism",
    "make_cell",
    "param_symbol",
    "parse_mechanism",
    "private_mechanisms",
    "register",
    "unregister",
]
