"""Which attacks a sweep's cells run, and the settings every attack is built from.

A cell runs every attack of the sweep's attack list (:func:`~attacks.registry.sweep_attacks`: each
registered attack whose class sets ``in_sweep``, in registration order; or the names given with
``--attack``) that its mechanism's release allows (:class:`~attacks.threat.ReleaseKind` against
each attack's ``needs``); the pipeline builds each one by name
(:func:`attacks.registry.build_attack`) from the profile's :class:`~attacks.attack.AttackSettings`.

Besides the release, the sweep gives every attacker its side knowledge (:data:`SIDE_KNOWLEDGE`):
reference records, the cell's D_test records outside D_atk
(:func:`audit.cell.membership.reference_records`), and, in cells whose attacks calibrate
(:func:`calibrates`: latent search, the likelihood attack), R reference VAEs trained on them
(:mod:`audit.cell.references`; R from the profile, ``--reference-models``). Those attacks add
their calibrated variants then; they never *need* reference models, so the plan does not count
them as side knowledge (an attack that needed them would apply to no cell with R = 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attacks.attack import AttackSettings
from attacks.distances import Distance, distances_for
from attacks.distances.ssim_window import SSIM_WIN_SIZE
from attacks.reconstruction import ReconstructionAttack
from attacks.registry import available_attacks, build_attack, get_attack, sweep_attacks
from attacks.threat import Capability, ReleaseKind, Threat
from dpvae_core.records import Modality, record_modality

SIDE_KNOWLEDGE: frozenset[Capability] = frozenset({Capability.REFERENCE_RECORDS})
"""What the sweep's attacker holds besides the release: reference records, no reference models."""

CELL_DEFAULT_ATTACKS: tuple[str, ...] = (ReconstructionAttack.name,)
"""What a cell config that names no attacks runs (the default of
:attr:`audit.config.CellConfig.attacks`, left out of a cell's hash and stored config at this
value, so every stored config keeps its meaning): the reconstruction attack alone. A sweep's
cells name theirs from :func:`plan_attacks`, whose default is every attack the release allows."""


def runs_against(attack: Threat, kind: ReleaseKind) -> bool:
    """Whether ``attack``'s needs are met by a release of ``kind`` plus :data:`SIDE_KNOWLEDGE`."""
    return attack.needs <= kind.capabilities | SIDE_KNOWLEDGE


def calibrates(names: Sequence[str]) -> bool:
    """Whether any attack of ``names`` (registered names) reads reference models."""
    return any(Capability.REFERENCE_MODELS in get_attack(n).uses for n in names)


def _allowed() -> str:
    return ", ".join(sweep_attacks())


def check_requested(names: Sequence[str]) -> tuple[str, ...]:
    """``--attack`` names, validated: each registered and in the sweep's list, no repeats;
    returned in the sweep's order (so that the same set always names the same cells)."""
    if isinstance(names, str) or not names:
        raise ValueError(f"--attack needs at least one attack name; allowed: {_allowed()}")
    for name in names:
        if not isinstance(name, str) or name not in available_attacks():
            raise ValueError(f"--attack {name!r} is not a registered attack; allowed: {_allowed()}")
        if name not in sweep_attacks():
            raise ValueError(
                f"--attack {name!r} is registered but not in the sweep's attack list; "
                f"allowed: {_allowed()}"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"--attack names repeat: {list(names)}; allowed: {_allowed()}")
    return tuple(name for name in sweep_attacks() if name in names)


def plan_attacks(
    requested: Sequence[str] | None, releases: Mapping[str, ReleaseKind]
) -> dict[str, tuple[str, ...]]:
    """The attacks each mechanism's cells run, for mechanisms ``releases`` (name -> what it
    releases; the baseline ``none`` included).

    ``requested`` None (no ``--attack``): every attack of the sweep's list the mechanism's
    release allows, so the cell's held-out worst case is over all of them.
    Otherwise the requested names (:func:`check_requested`), each of which must apply to every
    mechanism's release. A mechanism left with no attack is refused: its cells would measure
    nothing.
    """
    names = sweep_attacks() if requested is None else check_requested(requested)
    plan = {}
    for mech, kind in releases.items():
        runs = tuple(n for n in names if runs_against(get_attack(n), kind))
        if requested is not None and runs != names:
            refused = next(n for n in names if n not in runs)
            needs = ", ".join(sorted(c.value for c in get_attack(refused).needs))
            fits = [n for n in sweep_attacks() if runs_against(get_attack(n), kind)]
            raise ValueError(
                f"--attack {refused!r} does not apply to --mech {mech}, which releases "
                f"{kind.value} ({refused} needs {needs}); allowed for {mech}: "
                f"{', '.join(fits) or 'none of ' + _allowed()}"
            )
        if not runs:
            raise ValueError(
                f"no attack of the sweep's list ({_allowed()}) applies to --mech {mech}, which "
                f"releases {kind.value}; its cells would measure nothing"
            )
        plan[mech] = runs
    return plan


def ssim_attacks(names: Sequence[str], settings: AttackSettings) -> tuple[str, ...]:
    """The attacks of ``names`` (registered names) that score SSIM when built from ``settings``
    (the reconstruction attack on images: every distance of ``settings.distances``)."""

    def scored(name: str) -> set[Distance]:
        attack = build_attack(name, seed=0, device="cpu", settings=settings)
        return {*getattr(attack, "distances", ()), getattr(attack, "distance", None)}

    return tuple(name for name in names if Distance.SSIM in scored(name))


def below_ssim_window(record_shape: Sequence[int]) -> str | None:
    """``"HxW"`` where records of ``record_shape`` (C, H, W) are images smaller than SSIM's
    window (:data:`~attacks.distances.ssim_window.SSIM_WIN_SIZE` a side), else None."""
    if Modality.IMAGE is not _modality(record_shape):
        return None
    height, width = record_shape[-2:]
    return f"{height}x{width}" if min(height, width) < SSIM_WIN_SIZE else None


def _modality(record_shape: Sequence[int]) -> Modality | None:
    try:
        return record_modality(tuple(record_shape))
    except ValueError:
        return None


def check_ssim_window(
    record_shape: Sequence[int],
    plan: Mapping[str, Sequence[str]],
    releases: Mapping[str, ReleaseKind],
    *,
    settings: AttackSettings,
    what: str,
) -> None:
    """Refuse, in one line, images smaller than SSIM's window where an attack of ``plan``
    (mechanism -> its attacks, as :func:`plan_attacks` returns) would score SSIM on them: it
    would fail only once the cells run. ``what`` names the data (``--dataset npz:x.npz``). The
    message names the attacks that do not score SSIM and apply to every mechanism of
    ``releases``, as an ``--attack`` list."""
    size = below_ssim_window(record_shape)
    if size is None:
        return
    ssim = ssim_attacks(sweep_attacks(), settings)
    users = {n: [m for m, names in plan.items() if n in names] for n in ssim}
    users = {n: mechs for n, mechs in users.items() if mechs}
    if not users:
        return
    side = f"{SSIM_WIN_SIZE}x{SSIM_WIN_SIZE}"
    fits = [
        n
        for n in sweep_attacks()
        if n not in ssim and all(runs_against(get_attack(n), k) for k in releases.values())
    ]
    fix = f", or the attacks without SSIM: --attack {' '.join(fits)}" if fits else ""
    scorers = " and ".join(f"the {n} attack (--mech {', '.join(m)})" for n, m in users.items())
    raise ValueError(
        f"{what}: images of {size} pixels are smaller than SSIM's {side} window, which "
        f"{scorers} scores; use images of at least {side}{fix}"
    )


def attack_settings(*, attack_samples: int, modality: Modality | str) -> AttackSettings:
    """The profile-level settings every attack of a cell is built from: ``attack_samples``
    (the profile's N), the distances that apply to records of ``modality``, and the modality."""
    modality = Modality(modality)
    return AttackSettings(
        attack_samples=attack_samples, distances=distances_for(modality), modality=modality
    )
