"""Mechanism registry: one object per MechanismName; lookups list the valid names."""

from __future__ import annotations

from audit.config import MechanismName
from audit.mechanisms.base import CellData, Context, Mechanism, Prepared
from audit.mechanisms.cdp import CentralDP
from audit.mechanisms.ldp import LocalDP
from audit.mechanisms.none import NoPrivacy
from audit.mechanisms.termwise import TermwiseDP
from audit.mechanisms.vae_ldp import VaeLdp
from core.validation import parse_enum

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


register(NoPrivacy())
register(CentralDP())
register(TermwiseDP())
register(LocalDP())
register(VaeLdp())

__all__ = [
    "CellData",
    "Context",
    "Mechanism",
    "Prepared",
    "available_mechanisms",
    "get_mechanism",
    "register",
]
