"""The training hooks that plant and observe a one-run audit's canaries: input canaries by
label slot, gradient canaries by Dirac coordinates."""

from __future__ import annotations

import numpy as np
import torch

from attacks.latent_search import LatentSearchAttack
from attacks.reconstruction import ReconstructionAttack
from attacks.threat import ReleaseKind
from audit.empirical.one_run_settings import ONE_RUN_TAG, Broken
from dpvae_core.seeding import numpy_rng, torch_generator
from models.dp import clip_and_sum

#: The attack that scores input canaries, per release: the strongest of the release whose score
#: is one number per record fixed in advance (reconstruction for the whole VAE, the trade-off
#: paper's attack; GAN-Leaks' latent search for a decoder).
INPUT_CANARY_ATTACK: dict[ReleaseKind, str] = {
    ReleaseKind.WHOLE_VAE: ReconstructionAttack.name,
    ReleaseKind.DECODER_ONLY: LatentSearchAttack.name,
}


class Switches:
    """An audit hook (:class:`models.dp.AuditHook`) without canaries: only the test-only
    broken-mechanism switches."""

    def __init__(self, broken: Broken = Broken.NONE) -> None:
        self.unclipped = broken is Broken.NO_CLIP
        self.noiseless = broken is Broken.NO_NOISE

    def begin(self, params: list[torch.nn.Parameter]) -> None:
        return None

    def add_canaries(self, summed: list[torch.Tensor], *, clip_norm: float) -> list[torch.Tensor]:
        return summed

    def observe(self, noisy: list[torch.Tensor]) -> None:
        return None


#: Initial value of a label-slot canary's own column of the encoder's log-variance layer.
LABEL_SLOT_LOGVAR = -8.0


class LabelSlots(Switches):
    """The audit hook of ``label-slot`` input canaries: at :meth:`begin` it sets the initial
    weights of the m canary slots, the last m input columns of the conditional VAE's three dense
    layers (``fc_mu``, ``fc_logvar``, ``fc_dec``, in that order among the trained parameters;
    each reads the one-hot label last): 0, except ``fc_logvar``'s, :data:`LABEL_SLOT_LOGVAR`.
    A slot's final decoder weights are then its canary's pull plus the DP noise, with no random
    initial value on top, and a canary's posterior is narrow (std about e^-4), so that its
    latent z is small and more of its clipped gradient falls on its own ``fc_dec`` column
    (at initialisation 3-5 % of its norm instead of 2 %; the rest goes to the shared weights). Real
    records never read these columns. DP holds for every data-independent initialisation, so
    the auditor may choose these values; the sampling, clipping and noise are untouched."""

    def __init__(self, slots: int, broken: Broken = Broken.NONE) -> None:
        super().__init__(broken)
        self.slots = slots

    def begin(self, params: list[torch.nn.Parameter]) -> None:
        dense = [p for p in params if p.dim() == 2]
        if len(dense) != 3 or any(p.shape[1] <= self.slots for p in dense):
            raise ValueError(
                "label-slot canaries need the conditional conv VAE trained whole (three dense "
                "layers, each reading the one-hot label last); got dense shapes "
                f"{[tuple(p.shape) for p in dense]}"
            )
        with torch.no_grad():
            for p in dense:
                p[:, -self.slots :] = 0.0
            dense[1][:, -self.slots :] = LABEL_SLOT_LOGVAR


class GradientCanaries(Switches):
    """The audit hook for gradient canaries.

    At :meth:`begin`, canary j gets its own coordinate c_j, drawn without replacement from every
    coordinate of the privately trained parameters; its gradient is ``raw_norm * e_{c_j}``.
    Each step, every included canary is sampled with probability ``sample_rate``; the sampled
    ones are clipped by :func:`models.dp.clip_and_sum` (all canaries share a norm, so one
    clipped value serves all) and added to the clipped sum. ``sums`` accumulates the released
    noisy gradient on each canary's coordinate.
    """

    def __init__(
        self,
        *,
        included: np.ndarray,
        sample_rate: float,
        raw_norm: float,
        seed: int,
        broken: Broken = Broken.NONE,
    ) -> None:
        super().__init__(broken)
        self.included = torch.as_tensor(included, dtype=torch.bool)
        self.sample_rate, self.raw_norm, self.seed = sample_rate, raw_norm, seed
        self.gen = torch_generator(seed, ONE_RUN_TAG, "canary-sampling")
        m = len(included)
        self.sums = np.zeros(m)
        self.sampled = np.zeros(m, dtype=np.int64)
        self.params: list[torch.nn.Parameter] = []
        self.start = np.zeros(m)

    def begin(self, params: list[torch.nn.Parameter]) -> None:
        sizes = np.array([p.numel() for p in params])
        m = len(self.included)
        if m > sizes.sum():
            raise ValueError(
                f"{m} gradient canaries need as many coordinates; the privately trained "
                f"parameters have {int(sizes.sum())}"
            )
        flat = np.sort(
            numpy_rng(self.seed, ONE_RUN_TAG, "coordinates").choice(sizes.sum(), m, replace=False)
        )
        self.param_of = np.searchsorted(np.cumsum(sizes), flat, side="right")
        self.offset = flat - np.concatenate([[0], np.cumsum(sizes)])[self.param_of]
        self._by_param = {
            int(i): (self.param_of == i, torch.as_tensor(self.offset[self.param_of == i]))
            for i in np.unique(self.param_of)
        }
        self.params = list(params)
        self.start = self.coordinates()

    def add_canaries(self, summed: list[torch.Tensor], *, clip_norm: float) -> list[torch.Tensor]:
        draw = torch.rand(len(self.included), generator=self.gen) < self.sample_rate
        chosen = (draw & self.included).numpy()
        self.sampled += chosen
        value = clip_and_sum([torch.full((1, 1), self.raw_norm)], clip_norm=clip_norm)[0][0]
        out = [g.clone(memory_format=torch.contiguous_format) for g in summed]  # for view(-1)
        for i in np.unique(self.param_of[chosen]):
            where = torch.as_tensor(self.offset[chosen & (self.param_of == i)])
            flat = out[i].view(-1)
            flat.index_add_(0, where.to(flat.device), value.to(flat).expand(len(where)))
        return out

    def observe(self, noisy: list[torch.Tensor]) -> None:
        for i, (sel, where) in self._by_param.items():
            values = noisy[i].detach().reshape(-1)[where.to(noisy[i].device)]
            self.sums[sel] += values.double().cpu().numpy()

    def coordinates(self) -> np.ndarray:
        """The current values of the canaries' coordinates (after :meth:`begin`)."""
        flat = [p.detach().reshape(-1).cpu().double() for p in self.params]
        return np.array(
            [float(flat[i][o]) for i, o in zip(self.param_of, self.offset, strict=True)]
        )
