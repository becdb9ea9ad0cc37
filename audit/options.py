"""Typed mechanism options: frozen dataclasses whose fields declare their command-line flags.

A mechanism declares one :class:`MechanismOptions` subclass; each field is made by :func:`option`
(default None: "the mechanism's default") with a parser that turns a command-line string or a
Python value into the typed value (a float, an int, an Enum member), raising a ValueError that
quotes the bad value. The command line generates one flag per field name over all registered
mechanisms (:func:`option_flags`), so a new mechanism adds no hand-written flag; a cell holds its
mechanism's options, and :meth:`MechanismOptions.canonical` is what goes into the cell's hash.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar, TypeVar

from core.validation import check_delta, check_non_negative, check_positive, parse_enum

E = TypeVar("E", bound=Enum)
OptionsT = TypeVar("OptionsT", bound="MechanismOptions")
Parser = Callable[[Any], Any]


@dataclass(frozen=True)
class OptionSpec:
    """How one option is read: ``parse`` (raw -> typed, ValueError quoting the value) and the
    flag's ``help`` (without the mechanism names, which the flag generator adds)."""

    help: str
    parse: Parser
    metavar: str | None = None


def option(help: str, parse: Parser, metavar: str | None = None) -> Any:
    """A dataclass field of a :class:`MechanismOptions`: default None, declared flag."""
    return field(default=None, metadata={"spec": OptionSpec(help, parse, metavar)})


def _text_or_number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def positive_float(what: str) -> Parser:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
        number = _text_or_number(value)
        if math.isnan(number):
            raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
        return check_positive(what, number)

    return parse


def non_negative_float(what: str) -> Parser:
    def parse(value: Any) -> float:
        number = _text_or_number(value)
        if isinstance(value, bool) or math.isnan(number):
            raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
        return check_non_negative(what, number)

    return parse


def positive_int(what: str) -> Parser:
    def parse(value: Any) -> int:
        if isinstance(value, (bool, float)):
            raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{what} must be an integer >= 1, got {value!r}") from None
        if number < 1:
            raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
        return number

    return parse


def delta_value(value: Any) -> float:
    number = _text_or_number(value)
    if isinstance(value, bool) or math.isnan(number):
        raise ValueError(f"delta must lie in the open interval (0, 1), got {value!r}")
    return check_delta(number)


def choice(enum: type[E], what: str) -> Parser:
    def parse(value: Any) -> E:
        return parse_enum(enum, value, what)

    return parse


@dataclass(frozen=True)
class MechanismOptions:
    """Base of every mechanism's options: fields made by :func:`option`, None = default.

    Construction parses every given value (``__post_init__``), so an instance holds typed values
    only; :meth:`check` adds checks across fields.
    """

    mechanism: ClassVar[str] = "mechanism"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                object.__setattr__(self, f.name, f.metadata["spec"].parse(value))
        self.check()

    def check(self) -> None:
        """Checks across fields (the default has none)."""

    @classmethod
    def specs(cls) -> dict[str, OptionSpec]:
        return {f.name: f.metadata["spec"] for f in fields(cls)}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls: type[OptionsT], given: Mapping[str, Any]) -> OptionsT:
        """Options from ``{name: value}``; a name this mechanism does not read is refused."""
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            allowed = ", ".join(cls.names()) or "none"
            raise ValueError(
                f"{cls.mechanism}: option(s) {unknown} are not read by this mechanism; "
                f"its options: {allowed}"
            )
        return cls(**{k: v for k, v in given.items() if v is not None})

    def given(self) -> dict[str, Any]:
        """The options set (not None), typed."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }

    def canonical(self) -> dict[str, Any]:
        """The options set, as JSON values (an Enum as its value): what a cell's hash reads."""
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in self.given().items()}


@dataclass(frozen=True)
class NoOptions(MechanismOptions):
    """A mechanism without options."""


def flag(name: str) -> str:
    """The command-line flag of option ``name``: ``clip_norm`` -> ``--clip-norm``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class OptionFlag:
    """One generated flag: the option's name, its spec, and the mechanisms that read it."""

    name: str
    spec: OptionSpec
    readers: tuple[str, ...]

    @property
    def help(self) -> str:
        return f"{', '.join(self.readers)}: {self.spec.help}"


def option_flags(declared: Mapping[str, type[MechanismOptions]]) -> list[OptionFlag]:
    """One flag per option name over ``{mechanism: options type}``, in declaration order; a name
    declared by several mechanisms must share one spec (e.g. through inheritance)."""
    found: dict[str, OptionFlag] = {}
    for mech, options_type in declared.items():
        for name, spec in options_type.specs().items():
            known = found.get(name)
            if known is None:
                found[name] = OptionFlag(name, spec, (mech,))
            elif known.spec != spec:
                raise TypeError(f"option {name!r} is declared differently by {mech}")
            else:
                found[name] = OptionFlag(name, spec, (*known.readers, mech))
    return list(found.values())
