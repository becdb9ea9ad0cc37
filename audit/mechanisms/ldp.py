"""Local DP for images: Fan's DP image pixelization applied to the records (paper 003, LDP).

Settings (paper 003, Section 3): LDP-Full (the paper's) perturbs all data the target VAE sees,
here D_train and D_val; LDP-Train perturbs D_train only. In both, the target classifier is
scored on the real D_test and the attack uses unperturbed records (see audit.pipeline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from audit.config import CellConfig, MechanismName, parse_enum
from audit.mechanisms.base import CellData, Context, Mechanism, Prepared
from audit.privacy.claim import PrivacyClaim
from audit.privacy.pixelization import pixelization_claim, pixelize, valid_cell_sizes
from audit.seeding import Purpose, torch_generator
from models.training import Pair, TrainHistory


class LdpSetting(str, Enum):
    """Which splits are perturbed for the target VAE (paper 003, Section 3)."""

    FULL = "full"  # LDP-Full: D_train and D_val
    TRAIN = "train"  # LDP-Train: D_train only


@dataclass(frozen=True)
class PixelizationOptions:
    """The cell's pixelization settings: b (cell side), m (neighbourhood in pixels), setting."""

    setting: LdpSetting
    cell: int
    neighborhood: int


def default_neighborhood(height: int, width: int) -> int:
    """Paper 003's m = sqrt(H * W) (64 for 64x64 images), rounded to a whole pixel count."""
    return max(1, round(math.sqrt(height * width)))


def _int_option(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ldp: {name} must be an integer >= 1, got {value!r}")
    return value


def pixelization_options(cell: CellConfig, shape: tuple[int, ...]) -> PixelizationOptions:
    """Read and validate the ldp options of ``cell`` for records of ``shape`` (C, H, W).

    Raises a ValueError quoting the bad value (and, for b, the valid cell sizes) before any work.
    """
    if len(shape) != 3:
        raise ValueError(
            f"ldp: pixelization needs image records (C, H, W), got record shape {tuple(shape)}"
        )
    _, height, width = shape
    setting = parse_enum(
        LdpSetting, cell.option("ldp_setting", LdpSetting.FULL.value), "ldp setting"
    )
    b = _int_option("pixel cell b", cell.option("pixel_cell", 1))
    if height % b or width % b:
        valid = ", ".join(map(str, valid_cell_sizes(height, width)))
        raise ValueError(
            f"ldp: pixel cell b={b} does not tile the {height}x{width} images of this dataset "
            f"(b must divide both sides); valid b: {valid}"
        )
    m = cell.option("neighborhood")
    m = default_neighborhood(height, width) if m is None else _int_option("neighborhood m", m)
    if m > height * width:
        raise ValueError(
            f"ldp: neighborhood m={m} exceeds the {height * width} pixels of a {height}x{width} "
            f"image; choose 1..{height * width}"
        )
    return PixelizationOptions(setting=setting, cell=b, neighborhood=m)


class Pixelization(Mechanism):
    """``ldp``: each record replaced by its DP pixelization (Fan 2018) before training.

    Notes:
        Per-record epsilon is channels * eps_i under Fan's m-neighbourhood (images differing in
        up to m pixels), delta = 0; D_val in LDP-Train and D_test are not perturbed. Labels are
        released as they are.
    """

    name = MechanismName.LDP
    param_name = "eps_i"
    default_grid = (10000.0, 5000.0, 1000.0, 500.0, 100.0)
    option_names = ("pixel_cell", "neighborhood", "ldp_setting")

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        opts = pixelization_options(cell, data.shape)
        self.validate_value(cell.param_value)

        def perturb(split: str, pair: Pair) -> Pair:
            generator = torch_generator(cell.seed, Purpose.PERTURB, split)
            x = pixelize(
                pair[0].cpu(),
                eps_i=cell.param_value,
                cell=opts.cell,
                neighborhood=opts.neighborhood,
                generator=generator,
            )
            return x, pair[1]

        full = opts.setting is LdpSetting.FULL
        train = perturb("train", data.train)
        val = perturb("val", data.val) if full else data.val
        notes: dict[str, float | str] = {
            "ldp_setting": opts.setting.value,
            "pixel_cell": opts.cell,
            "neighborhood": opts.neighborhood,
            "perturbed": "D_train and D_val" if full else "D_train only",
            "unperturbed": "D_test (classifier scoring) and the attack records",
        }
        return Prepared(train=train, val=val, notes=notes)

    def claim(self, cell: CellConfig, data: CellData, history: TrainHistory) -> PrivacyClaim:
        opts = pixelization_options(cell, data.shape)
        return pixelization_claim(
            eps_i=cell.param_value,
            channels=data.shape[0],
            n_records=data.n_total,
            neighborhood=opts.neighborhood,
        )
