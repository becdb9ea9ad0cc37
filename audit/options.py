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

from dpvae_core.validation import check_delta, check_non_negative, check_positive, parse_enum

E = TypeVar("E", bound=Enum)
OptionsT = TypeVar("OptionsT", bound="MechanismOptions")
#: Turns one option value as given (a flag's string or a Python value) into its typed value.
ValueParser = Callable[[Any], Any]


@dataclass(frozen=True)
class OptionSpec:
    """How one option is read: ``parse`` (raw -> typed, ValueError quoting the value), the
    flag's ``help`` (without the mechanism names, which the flag generator adds), its
    ``metavar``, ``cli_type`` (what argparse converts the text to first: str, int or float) and
    further flag spellings (``aliases``)."""

    help: str
    parse: ValueParser
    metavar: str | None = None
    cli_type: type = str
    aliases: tuple[str, ...] = ()


def option(
    help: str,
    parse: ValueParser,
    metavar: str | None = None,
    *,
    cli_type: type = str,
    aliases: tuple[str, ...] = (),
) -> Any:
    """A dataclass field of a :class:`MechanismOptions`: default None, declared flag."""
    spec = OptionSpec(help, parse, metavar, cli_type, aliases)
    return field(default=None, metadata={"spec": spec})


def _text_or_number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def positive_float(what: str) -> ValueParser:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
        number = _text_or_number(value)
        if math.isnan(number):
            raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
        return check_positive(what, number)

    return parse


def float_in_range(what: str, low: float, high: float, *, zero: bool = False) -> ValueParser:
    """A number in [``low``, ``high``] (or 0 where ``zero``): a mechanism's parameter in the
    range where its accounting and noise are computed (:attr:`Mechanism.param_range`)."""
    allowed = f"{'0 or ' if zero else ''}a number in [{low:g}, {high:g}]"

    def parse(value: Any) -> float:
        number = _text_or_number(value)
        if isinstance(value, bool) or not (low <= number <= high or (zero and number == 0)):
            raise ValueError(
                f"{what} must be {allowed} (where its accounting and noise are computed "
                f"without overflow), got {value!r}"
            )
        return number

    return parse


def non_negative_float(what: str) -> ValueParser:
    def parse(value: Any) -> float:
        number = _text_or_number(value)
        if isinstance(value, bool) or math.isnan(number):
            raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
        return check_non_negative(what, number)

    return parse


def positive_int(what: str) -> ValueParser:
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


def choice(enum: type[E], what: str) -> ValueParser:
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


@dataclass(frozen=True)
class AccountingParams(MechanismOptions):
    """What ``benchmark.py epsilon`` needs to account a mechanism without training it: fields
    declared like options (one ``epsilon`` flag each); ``required`` names those that must be
    given."""

    required: ClassVar[tuple[str, ...]] = ()

    def check(self) -> None:
        missing = [flag(name) for name in self.required if getattr(self, name) is None]
        if missing:
            raise ValueError(f"--mech {self.mechanism} needs {', '.join(missing)}")


def flag(name: str) -> str:
    """The command-line flag of option ``name``: ``clip_norm`` -> ``--clip-norm``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class OptionFlag:
    """One generated flag: the option's name and, per distinct spec, the mechanisms that read it
    with that spec (mechanisms sharing a field through inheritance share one spec)."""

    name: str
    specs: tuple[tuple[OptionSpec, tuple[str, ...]], ...]

    @property
    def readers(self) -> tuple[str, ...]:
        return tuple(m for _, mechs in self.specs for m in mechs)

    @property
    def help(self) -> str:
        return "; ".join(f"{', '.join(mechs)}: {spec.help}" for spec, mechs in self.specs)

    @property
    def first(self) -> OptionSpec:
        return self.specs[0][0]

    def add_to(self, group: Any) -> None:
        """Add this flag to an argparse parser or group (default None: not given)."""
        cli_types = {spec.cli_type for spec, _ in self.specs}
        if len(cli_types) > 1:
            raise TypeError(f"option {self.name!r} is read as {sorted(map(str, cli_types))}")
        group.add_argument(
            flag(self.name),
            *self.first.aliases,
            dest=self.name,
            default=None,
            type=self.first.cli_type,
            metavar=self.first.metavar,
            help=self.help,
        )


def option_flags(declared: Mapping[str, type[MechanismOptions]]) -> list[OptionFlag]:
    """One flag per option name over ``{mechanism: options type}``, in declaration order."""
    found: dict[str, list[tuple[OptionSpec, list[str]]]] = {}
    for mech, options_type in declared.items():
        for name, spec in options_type.specs().items():
            entries = found.setdefault(name, [])
            same = next((e for e in entries if e[0] == spec), None)
            if same is None:
                entries.append((spec, [mech]))
            else:
                same[1].append(mech)
    return [
        OptionFlag(name, tuple((spec, tuple(mechs)) for spec, mechs in entries))
        for name, entries in found.items()
    ]
