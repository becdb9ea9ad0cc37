"""``benchmark.py epsilon``: a mechanism's privacy accounting on demand, through the mechanism
registry (each mechanism's :class:`~audit.options.AccountingParams` declares its flags); the last
line printed is the bare number."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from audit.cli.parsing import Parser, add_verbosity
from audit.mechanisms import available_mechanisms, get_mechanism, parse_mechanism
from audit.options import AccountingParams, flag, option_flags


def accounted_mechanisms() -> list[str]:
    """Registered mechanisms with accounting on demand."""
    return [m for m in available_mechanisms() if get_mechanism(m).accounting_type is not None]


def _declared() -> dict[str, type[AccountingParams]]:
    return {m: get_mechanism(m).accounting_type for m in accounted_mechanisms()}


def build_epsilon_parser() -> Parser:
    names = accounted_mechanisms()
    p = Parser(
        prog="benchmark.py epsilon",
        description="Privacy accounting on demand. Prints how the number was computed; the last "
        "line is the bare number (epsilon, or the noise multiplier with --target-epsilon).",
    )
    p.add_argument(
        "--mech",
        default=names[0],
        choices=names,
        help="; ".join(f"{m}: {get_mechanism(m).accounting_help}" for m in names)
        + f". Default: {names[0]}",
    )
    group = p.add_argument_group("accounting parameters (each mechanism declares its own)")
    for option in option_flags(_declared()):
        option.add_to(group)
    add_verbosity(p)
    return p


@dataclass(frozen=True)
class EpsilonRequest:
    """A validated ``epsilon`` request: the mechanism and its accounting parameters."""

    mech: str
    params: AccountingParams


def epsilon_request(args: argparse.Namespace) -> EpsilonRequest:
    """The request of parsed arguments; a parameter the mechanism does not read is refused."""
    mech = parse_mechanism(args.mech)
    declared = _declared()
    if mech not in declared:
        raise ValueError(f"--mech {mech} has no accounting; choose one of {list(declared)}")
    mine = declared[mech].names()
    given = {}
    for option in option_flags(declared):
        value = getattr(args, option.name, None)
        if value is None:
            continue
        if option.name not in mine:
            only = ", ".join(sorted(option.readers))
            raise ValueError(f"{flag(option.name)} does not apply to --mech {mech} (only {only})")
        given[option.name] = value
    return EpsilonRequest(mech, declared[mech].from_mapping(given))


def run_epsilon(request: EpsilonRequest) -> str:
    """The command's text: how the value was computed, then the bare value on the last line."""
    accounted = get_mechanism(request.mech).account(request.params)
    return "\n".join([*accounted.lines, f"{accounted.value:.10g}"])


def epsilon_main(argv: Sequence[str]) -> int:
    from audit.cli.logs import configure_logging

    args = build_epsilon_parser().parse_args(list(argv))
    configure_logging(args.verbose)
    print(run_epsilon(epsilon_request(args)))
    return 0
