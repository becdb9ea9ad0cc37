"""VAE-LDP (Weggenmann et al., as in the trade-off paper): records replaced by one stochastic
reconstruction of a perturbation VAE with a bounded mean and a noise floor sigma.

Which data the perturbation model learns from (option ``perturbation_data``):
- ``val`` (default): D_val. D_val is then not training data of the target VAE; the target
  trains on the perturbed D_train and is validated on a perturbed copy of D_val. The claimed
  epsilon covers the released D_train records; D_val's records shaped the perturbation model
  outside any accounting (they are neither attacked nor released as training data).
- ``train``: D_train itself (the trade-off paper's implicit choice). The perturbation model is
  then a non-private function of the very records it perturbs, so the claimed epsilon does not
  cover its training; the row says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

import torch

from audit.config import CellConfig
from audit.mechanisms.mechanism import (
    Accounted,
    CellData,
    Context,
    Mechanism,
    Prepared,
    Trained,
    describe_claim,
    vae_settings,
)
from audit.options import (
    AccountingParams,
    MechanismOptions,
    choice,
    delta_value,
    float_in_range,
    option,
    positive_int,
)
from audit.privacy.claim import GaussianConversion, PrivacyClaim
from audit.privacy.noise_calibration import MAX_NOISE_MULTIPLIER, MIN_NOISE_MULTIPLIER
from audit.privacy.vae_ldp_accounting import MEAN_BOUND, vae_ldp_claim
from dpvae_core.records import Modality
from dpvae_core.seeding import Purpose, derive_seed, torch_generator
from models.factory import model_family
from models.perturbation import NoiseBound
from models.training import Pair, TrainHistory, train_vae

if TYPE_CHECKING:
    from audit.empirical.local import LocalAudit

log = logging.getLogger(__name__)


class PerturbationData(str, Enum):
    """The split the perturbation VAE is trained on."""

    VAL = "val"
    TRAIN = "train"


COVERAGE = {
    PerturbationData.VAL: "perturbation model trained on D_val (not target training data)"
    ", epsilon covers the released D_train records",
    PerturbationData.TRAIN: "perturbation model trained on D_train, the records it perturbs"
    ": the claimed epsilon does NOT cover the perturbation model's own training",
}
#: How the released latent noise is drawn: std exactly sigma, whatever the record
#: (:meth:`models.perturbation.NoiseBound.perturb`), which the Gaussian-mechanism bound covers.
RELEASE_NOTE = "released latent noise std exactly sigma (data-independent)"


@dataclass(frozen=True)
class VaeLdpOptions(MechanismOptions):
    """The options of ``vae-ldp``."""

    mechanism: ClassVar[str] = "vae-ldp"
    perturbation_data: PerturbationData | None = option(
        "data the perturbation VAE is trained on: val (D_val, the default) or train (D_train, "
        "the trade-off paper's implicit choice; not covered by the claim)",
        choice(PerturbationData, "perturbation data"),
    )

    @property
    def source(self) -> PerturbationData:
        return self.perturbation_data or PerturbationData.VAL


@dataclass(frozen=True)
class VaeLdpEpsilonParams(AccountingParams):
    """``benchmark.py epsilon --mech vae-ldp``: the Gaussian mechanism on the bounded mean."""

    mechanism: ClassVar[str] = "vae-ldp"
    required: ClassVar[tuple[str, ...]] = ("sigma", "latent_dim", "delta")
    sigma: float | None = option(
        "noise bound sigma of the perturbation VAE",
        float_in_range("sigma", MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER),
        "S",
        cli_type=float,
    )
    latent_dim: int | None = option(
        f"latent dimensions d; sensitivity 2 * {MEAN_BOUND:g} * sqrt(d)",
        positive_int("latent_dim"),
        "d",
        cli_type=int,
    )
    delta: float | None = option("delta in (0, 1) (required)", delta_value, "D", cli_type=float)
    conversion: GaussianConversion | None = option(
        "analytic (Balle and Wang 2018, a bound for every epsilon; default) or classic (the "
        "trade-off paper's formula, a bound only below 1)",
        choice(GaussianConversion, "conversion"),
        "NAME",
    )


def _empty(pair: Pair) -> Pair:
    return pair[0][:0], pair[1][:0]


class VaeLdp(Mechanism):
    """``vae-ldp``: the target VAE trains on records perturbed by a perturbation VAE.

    The perturbation model has the target's architecture and latent size d (the conv VAE for
    images, the multitask LSTM VAE for series; :mod:`models.factory`), trained with the target's
    objective for the cell's epochs, batch size and learning rate.

    Notes:
        epsilon is the analytic Gaussian mechanism's (Balle and Wang 2018, Theorem 8) for L2
        sensitivity Delta = 2 * 3 * sqrt(d) and delta = 1/|D|, a bound for every epsilon. The
        trade-off paper's classic Delta * sqrt(2 ln(1.25 / delta)) / sigma (its Table 2) is in the
        notes as ``epsilon_classic``; it is a bound only below 1. Labels are not perturbed. See the
        module docstring for what the claim covers.
    """

    name = "vae-ldp"
    param_name = "sigma"
    param_symbol = "σ"
    param_label = "noise bound σ"
    param_description = "perturbation noise bound σ"
    accounting_help = "VAE-LDP Gaussian mechanism"
    default_grid = (0.1, 1.0, 10.0, 100.0, 1000.0)
    options_type = VaeLdpOptions
    accounting_type = VaeLdpEpsilonParams
    modalities = frozenset({Modality.IMAGE, Modality.SERIES})
    modality_reason = (
        "the perturbation VAE exists for the conv and LSTM VAEs; choose none, cdp or cdp-termwise"
    )

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        source = self.options_of(cell).source
        self.validate_value(cell.param_value)
        fit, monitor = (
            (data.val, _empty(data.val))
            if source is PerturbationData.VAL
            else (data.train, data.val)
        )
        model, history = self.fit_perturbation_model(cell, data, fit, monitor, ctx)

        def perturb(split: str, pair: Pair) -> Pair:
            generator = torch_generator(cell.seed, Purpose.PERTURB, cell.noise_key, split)
            return model.perturb(pair[0], pair[1], generator=generator), pair[1]

        notes: dict[str, float | str] = {
            "perturbation_data": source.value,
            "perturbation_model_n": len(fit[0]),
            "perturbation_model_epochs": cell.profile.epochs,
            "perturbation_model_loss": history.train_loss[-1],
            "perturbed": "D_train (target training) and D_val (target validation)",
            "unperturbed": "D_test (classifier scoring) and the attack records",
        }
        return Prepared(
            train=perturb("train", data.train), val=perturb("val", data.val), notes=notes
        )

    def fit_perturbation_model(
        self, cell: CellConfig, data: CellData, fit: Pair, monitor: Pair, ctx: Context
    ) -> tuple[NoiseBound, TrainHistory]:
        """A fresh perturbation VAE (seeded init) trained on ``fit``; ``monitor`` is only logged."""
        family = model_family(data.shape, data.num_classes)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(cell.seed, Purpose.INIT, "perturbation") % 2**63)
            model = family.perturbation_vae(
                latent_dim=cell.profile.latent_dim, sigma=cell.param_value, mean_bound=MEAN_BOUND
            ).to(ctx.device)
        settings = replace(
            vae_settings(cell, ctx), seed=derive_seed(cell.seed, Purpose.TRAIN, "perturbation")
        )
        history = train_vae(model, fit, monitor, settings, progress=ctx.progress)
        log.info(
            "perturbation VAE (sigma=%s) trained on %d records, final loss %.3f",
            cell.param_value,
            len(fit[0]),
            history.train_loss[-1],
        )
        return model, history

    def account(self, params: AccountingParams) -> Accounted:
        """The Gaussian-mechanism claim of sigma and d at delta."""
        params = self.typed_params(params)
        claim = vae_ldp_claim(
            sigma=params.sigma,
            latent_dim=params.latent_dim,
            delta=params.delta,
            conversion=params.conversion or GaussianConversion.ANALYTIC,
        )
        lines = (f"mechanism: {self.name}", *describe_claim(claim))
        return Accounted(lines, claim.epsilon)

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        source = self.options_of(cell).source
        base = vae_ldp_claim(
            sigma=cell.param_value, latent_dim=cell.profile.latent_dim, delta=1.0 / data.n_total
        )
        extra = {
            **base.extra,
            "delta_from": _delta_from(data),
            "coverage": COVERAGE[source],
            "release_noise": RELEASE_NOTE,
            "labels": "not perturbed (released as they are)",
        }
        return replace(base, extra=extra)

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
        """The corner-means audit of the Gaussian release at the cell's sigma and d, at ``delta``
        (None: the claim's, 1/|D|)."""
        from audit.empirical.local import audit_vae_ldp

        chosen = 1.0 / data.n_total if delta is None else delta
        audit = audit_vae_ldp(
            mechanism=self.name,
            sigma=cell.param_value,
            latent_dim=cell.profile.latent_dim,
            delta=chosen,
            draws=draws,
            seed=seed,
        )
        return (audit if delta is not None else replace(audit, delta_from=_delta_from(data)),)


def _delta_from(data: CellData) -> str:
    return f"1/|D| with |D| = {data.n_total}"
