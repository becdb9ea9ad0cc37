"""Local DP applied to the records (the trade-off paper, LDP): Fan's DP image pixelization for
images, the Laplace mechanism per measurement for sensor series.

Scopes (the trade-off paper, Section 3): LDP-Full (the paper's) perturbs all data the target VAE
sees, here D_train and D_val; LDP-Train perturbs D_train only. In both, the target classifier is
scored on the real D_test and the attack uses unperturbed records (see audit.sweep.cell_run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

from audit.config import CellConfig
from audit.mechanisms.laplace_noise import laplace_perturb_series
from audit.mechanisms.mechanism import (
    Accounted,
    CellData,
    Context,
    DataFacts,
    Mechanism,
    Prepared,
    Trained,
    describe_claim,
)
from audit.mechanisms.pixelization_noise import pixelize
from audit.options import (
    AccountingParams,
    MechanismOptions,
    choice,
    float_in_range,
    option,
    positive_int,
)
from audit.privacy.claim import PrivacyClaim
from audit.privacy.laplace import laplace_claim
from audit.privacy.noise_calibration import MIN_NOISE_MULTIPLIER
from audit.privacy.pixelization import pixelization_claim, valid_block_sizes
from dpvae_core.records import Modality, record_modality
from dpvae_core.seeding import Purpose, torch_generator
from models.training import Pair

if TYPE_CHECKING:
    from audit.empirical.local import LocalAudit


class LdpScope(str, Enum):
    """Which splits are perturbed for the target VAE (the trade-off paper, Section 3)."""

    FULL = "full"  # LDP-Full: D_train and D_val
    TRAIN = "train"  # LDP-Train: D_train only


@dataclass(frozen=True)
class PixelizationOptions:
    """The cell's pixelization options: b (block side), m (neighbourhood in pixels), scope."""

    scope: LdpScope
    block: int
    neighborhood: int


#: eps_i grids: the trade-off paper's for images (Fan's pixelization, LFW) and for series
#: (MotionSense).
#: The eps_i the mechanism takes: from the noise calibration's floor (1e-4: a Laplace scale of
#: 1/eps_i stays far inside float32) to 1e12 (epsilon grows linearly in eps_i and the noise
#: vanishes, both computed without overflow far past it; a test keeps the images at 1e9).
EPS_I_RANGE = (MIN_NOISE_MULTIPLIER, 1e12)
DEFAULT_GRIDS: dict[Modality, tuple[float, ...]] = {
    Modality.IMAGE: (10000.0, 5000.0, 1000.0, 500.0, 100.0),
    Modality.SERIES: (10.0, 1.0, 0.5, 0.1, 0.01),
}
#: The domain of a series value: the scale the pipeline gives series (each dataset's fixed
#: per-channel ranges, clipped into and mapped to [-1, 1]; ChannelScaler in audit.datasets.series),
#: so each sensor's sensitivity is 2 there, the scale the noise is added in.
SERIES_BOUNDS = (-1.0, 1.0)
#: What every ldp row says about labels.
LABELS_NOTE = "not perturbed (released as they are with the perturbed records)"
IMAGE_OPTIONS = ("pixel_block", "neighborhood")


@dataclass(frozen=True)
class LdpOptions(MechanismOptions):
    """The options of ``ldp`` (each None: the default named in its help)."""

    mechanism: ClassVar[str] = "ldp"
    pixel_block: int | None = option(
        "pixelization block b (images only; default 1)",
        positive_int("ldp: pixel block b"),
        cli_type=int,
    )
    neighborhood: int | None = option(
        "neighbourhood m in pixels (images only; default sqrt(H*W))",
        positive_int("ldp: neighborhood m"),
        cli_type=int,
    )
    ldp_scope: LdpScope | None = option(
        "full (perturb D_train and D_val, the trade-off paper's; default) or train (only D_train)",
        choice(LdpScope, "ldp scope"),
    )

    @property
    def scope(self) -> LdpScope:
        return self.ldp_scope or LdpScope.FULL


@dataclass(frozen=True)
class LdpEpsilonParams(AccountingParams):
    """``benchmark.py epsilon --mech ldp``: Fan's image pixelization of one image size."""

    mechanism: ClassVar[str] = "ldp"
    required: ClassVar[tuple[str, ...]] = ("eps_i", "height", "width")
    eps_i: float | None = option(
        "epsilon eps_i of one channel's pixelization",
        float_in_range("eps_i", *EPS_I_RANGE),
        "E",
        cli_type=float,
    )
    channels: int | None = option(
        "channels perturbed independently (default 3, RGB)",
        positive_int("channels"),
        "C",
        cli_type=int,
    )
    height: int | None = option("image height in pixels", positive_int("height"), "H", cli_type=int)
    width: int | None = option("image width in pixels", positive_int("width"), "W", cli_type=int)
    pixel_block: int | None = option(
        "pixelization block side b, dividing H and W (default 1); epsilon does not depend on it",
        positive_int("pixel block b"),
        "b",
        cli_type=int,
    )
    neighborhood: int | None = option(
        "Fan's neighbourhood m in pixels, 1..H*W (default round(sqrt(H*W)), the trade-off paper's)",
        positive_int("neighborhood m"),
        "m",
        cli_type=int,
        aliases=("--m",),
    )
    n_records: int | None = option(
        "|D|: also show the trade-off paper's dataset-wide sum |D| * epsilon",
        positive_int("n_records"),
        "N",
        cli_type=int,
    )


def default_neighborhood(height: int, width: int) -> int:
    """The trade-off paper's m = sqrt(H * W) (64 for 64x64 images), rounded to a whole pixel
    count."""
    return max(1, round(math.sqrt(height * width)))


def options_for_images(options: LdpOptions, shape: tuple[int, ...]) -> PixelizationOptions:
    """The pixelization options of ``options`` for records of ``shape`` (C, H, W).

    Raises a ValueError quoting the bad value (and, for b, the valid block sizes) before any work.
    """
    if len(shape) != 3:
        raise ValueError(
            f"ldp: pixelization needs image records (C, H, W), got record shape {tuple(shape)}"
        )
    _, height, width = shape
    b = 1 if options.pixel_block is None else options.pixel_block
    if height % b or width % b:
        valid = ", ".join(map(str, valid_block_sizes(height, width)))
        raise ValueError(
            f"ldp: pixel block b={b} does not tile the {height}x{width} images of this dataset "
            f"(b must divide both sides); valid b: {valid}"
        )
    m = options.neighborhood
    m = default_neighborhood(height, width) if m is None else m
    if m > height * width:
        raise ValueError(
            f"ldp: neighborhood m={m} exceeds the {height * width} pixels of a {height}x{width} "
            f"image; choose 1..{height * width}"
        )
    return PixelizationOptions(scope=options.scope, block=b, neighborhood=m)


def check_series_options(options: LdpOptions) -> None:
    """Refuse image-only options on a series cell; the ValueError names them."""
    given = [name for name in IMAGE_OPTIONS if getattr(options, name) is not None]
    if given:
        raise ValueError(
            f"ldp: {', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to images only; "
            "series get the Laplace mechanism per measurement (drop the option)"
        )


class LocalDP(Mechanism):
    """``ldp``: each record replaced by a locally private version before training.

    Images: DP pixelization (Fan 2018; :func:`pixelization_options`). Series (B, T, F) in the
    pipeline's [-1, 1] scale: the Laplace mechanism per measurement with sensitivity 2 per sensor
    (the range of :data:`SERIES_BOUNDS`, the image of the dataset's fixed channel ranges), i.e.
    Laplace(2 / eps_i) noise, clipped back to [-1, 1].

    Notes:
        Images: epsilon = channels * eps_i * H * W / m for any two records
        (:func:`audit.privacy.pixelization.pixelization_epsilon`); channels * eps_i under Fan's
        m-neighbourhood is in the notes. Series: eps_i per measurement times the windows it
        appears in, and per record the sum over every noisy copy of the window's values
        (:func:`audit.privacy.laplace.laplace_claim`; T * F * eps_i without overlap).
        delta = 0; D_val in LDP-Train and D_test are not perturbed; labels are released as they
        are (every row says so). Series scaling uses fixed ranges, no statistic of the records.
    """

    name = "ldp"
    param_name = "eps_i"
    param_symbol = "εᵢ"
    param_label = "εᵢ per pixel block"
    param_description = "pixelization εᵢ"
    pure_dp = True
    accounting_help = (
        "Fan's image pixelization (any two records: eps = channels * eps_i * H * W / m)"
    )
    default_grid = DEFAULT_GRIDS[Modality.IMAGE]
    options_type = LdpOptions
    accounting_type = LdpEpsilonParams
    param_range = EPS_I_RANGE
    modalities = frozenset({Modality.IMAGE, Modality.SERIES})
    modality_reason = (
        "pixelization perturbs images and the Laplace mechanism series on a bounded range; "
        "points have no fixed range: choose none, cdp or cdp-termwise"
    )

    def _check_options(
        self, options: LdpOptions, *, batch_size: int, data: DataFacts | None
    ) -> None:
        """With the data: b and m against the images' size (or no image options on series)."""
        if data is None:
            return
        if record_modality(data.record_shape) is Modality.SERIES:
            check_series_options(options)
        else:
            options_for_images(options, data.record_shape)

    def default_grid_for(self, modality: Modality) -> tuple[float, ...]:
        """The trade-off paper's eps_i grid for records of ``modality``."""
        return DEFAULT_GRIDS.get(Modality(modality), DEFAULT_GRIDS[Modality.IMAGE])

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        if record_modality(data.shape) is Modality.SERIES:
            return self._prepare_series(cell, data)
        opts = options_for_images(self.options_of(cell), data.shape)
        self.validate_value(cell.param_value)

        def perturb(split: str, pair: Pair) -> Pair:
            generator = torch_generator(cell.seed, Purpose.PERTURB, cell.noise_key, split)
            x = pixelize(
                pair[0].cpu(),
                eps_i=cell.param_value,
                block=opts.block,
                neighborhood=opts.neighborhood,
                generator=generator,
            )
            return x, pair[1]

        full = opts.scope is LdpScope.FULL
        train = perturb("train", data.train)
        val = perturb("val", data.val) if full else data.val
        notes: dict[str, float | str] = {
            "ldp_scope": opts.scope.value,
            "pixel_block": opts.block,
            "neighborhood": opts.neighborhood,
            "perturbed": "D_train and D_val" if full else "D_train only",
            "unperturbed": "D_test (classifier scoring) and the attack records",
            "labels": LABELS_NOTE,
        }
        return Prepared(train=train, val=val, notes=notes)

    def _prepare_series(self, cell: CellConfig, data: CellData) -> Prepared:
        options = self.options_of(cell)
        check_series_options(options)
        scope = options.scope
        self.validate_value(cell.param_value)

        def perturb(split: str, pair: Pair) -> Pair:
            generator = torch_generator(cell.seed, Purpose.PERTURB, cell.noise_key, split)
            x = pair[0].cpu().clamp(*SERIES_BOUNDS)  # already so from the pipeline; per value
            noisy = laplace_perturb_series(
                x, eps_i=cell.param_value, generator=generator, bounds=SERIES_BOUNDS
            )
            return noisy, pair[1]

        full = scope is LdpScope.FULL
        train = perturb("train", data.train)
        val = perturb("val", data.val) if full else data.val
        notes: dict[str, float | str] = {
            "ldp_scope": scope.value,
            "laplace_bounds": "[-1, 1] per sensor, the image of the dataset's fixed channel "
            "ranges (see series_scaling)",
            "sensitivity_per_sensor": SERIES_BOUNDS[1] - SERIES_BOUNDS[0],
            "perturbed": "D_train and D_val" if full else "D_train only",
            "unperturbed": "D_test (classifier scoring) and the attack records",
            "labels": LABELS_NOTE,
        }
        return Prepared(train=train, val=val, notes=notes)

    def account(self, params: AccountingParams) -> Accounted:
        """The pixelization claim of one image size (any two records)."""
        params = self.typed_params(params)
        m = params.neighborhood
        claim = pixelization_claim(
            eps_i=params.eps_i,
            channels=3 if params.channels is None else params.channels,
            height=params.height,
            width=params.width,
            block=1 if params.pixel_block is None else params.pixel_block,
            neighborhood=default_neighborhood(params.height, params.width) if m is None else m,
            n_records=params.n_records,
        )
        lines = (f"mechanism: {self.name}", *describe_claim(claim))
        return Accounted(lines, claim.epsilon)

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        if record_modality(data.shape) is Modality.SERIES:
            length, features = data.shape
            return laplace_claim(
                eps_i=cell.param_value,
                window_length=length,
                n_features=features,
                window_stride=cell.option("window_stride"),
                n_records=data.n_total,
            )
        opts = options_for_images(self.options_of(cell), data.shape)
        channels, height, width = data.shape
        return pixelization_claim(
            eps_i=cell.param_value,
            channels=channels,
            height=height,
            width=width,
            block=opts.block,
            neighborhood=opts.neighborhood,
            n_records=data.n_total,
        )

    def local_audits(
        self,
        cell: CellConfig,
        data: CellData,
        *,
        draws: int,
        seed: int,
        delta: float | None = None,
        every: bool = False,
    ) -> tuple[LocalAudit, ...]:
        """Images: pixelization with the cell's b and m, black against white (the any-two-records
        claim of the ``epsilon`` column), after black against m white pixels (Fan's
        m-neighbourhood) where ``every``. Series: the Laplace mechanism on one value at -1 and +1,
        a neighbour of the record-level claim. Pure epsilon-DP: ``delta`` is not read."""
        from audit.empirical.local import Pattern, audit_laplace_series, audit_pixelization

        if record_modality(data.shape) is Modality.SERIES:
            return (audit_laplace_series(eps_i=cell.param_value, draws=draws, seed=seed),)
        opts = options_for_images(self.options_of(cell), data.shape)
        patterns = (Pattern.NEIGHBOURHOOD, Pattern.ANY_TWO) if every else (Pattern.ANY_TWO,)
        return tuple(
            audit_pixelization(
                eps_i=cell.param_value,
                shape=tuple(data.shape),
                block=opts.block,
                neighborhood=opts.neighborhood,
                pattern=pattern,
                draws=draws,
                seed=seed,
            )
            for pattern in patterns
        )


#: The name ``audit.mechanisms`` registers; it now covers series too (see :class:`LocalDP`).
