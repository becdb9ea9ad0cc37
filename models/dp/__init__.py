"""Differentially private training of the VAEs: gradient privatisation lives here.

- :mod:`models.dp.engine`: per-example gradients (Opacus grad-sample modules or book-keeping),
  clipping, the Gaussian noise;
- :mod:`models.dp.book_keeping`: the book-keeping clipper (one backward pass, no per-example
  gradient materialised where a layer allows);
- :mod:`models.dp.clip_norm`: the default clip norm and the trade-off paper's median heuristic;
- :mod:`models.dp.microbatch`: DP-Adam's clipping groups of k records (fixed per record);
- :mod:`models.dp.dp_adam`: the DP-Adam loop and the frozen record of what it ran (:class:`DPRun`);
- :mod:`models.dp.termwise_loop`: term-wise DP-Adam (PriVAE);
- :mod:`models.dp.dp2vae_loop`: DP2-VAE's two-stage training (the DP2-VAE paper), with
  :mod:`models.dp.dp2vae_decoder` (the released decoder and the encoder side of a VAE) and
  :mod:`models.dp.dp2vae_subsets` (its keyed subsets of D_train and their Poisson batches).
"""

from models.dp.book_keeping import CLIP_EPS, BookKeepingGradients, ClippedSum
from models.dp.clip_norm import DEFAULT_CLIP_NORM, MEDIAN_WARMUP_EPOCHS, median_gradient_norm
from models.dp.dp_adam import (
    AuditHook,
    BatchTerm,
    BatchTermRun,
    DPRun,
    DPSettings,
    check_per_example_objective,
    private_gradient,
    standard_dp_noise_std_with_batch_term,
    train_dp_vae,
)
from models.dp.engine import (
    DEFAULT_GRAD_SAMPLE_MODE,
    GradSampleMode,
    PerExampleGradients,
    SampleLoss,
    clip_and_sum,
    noisy_average,
    parse_mode,
    per_unit_norms,
    quiet_backward_hooks,
)
from models.dp.microbatch import (
    MICROBATCH_CLIP_FACTOR,
    microbatch_groups,
    microbatch_notes,
    unit_clip_norm,
)

__all__ = [
    "CLIP_EPS",
    "DEFAULT_CLIP_NORM",
    "DEFAULT_GRAD_SAMPLE_MODE",
    "MEDIAN_WARMUP_EPOCHS",
    "MICROBATCH_CLIP_FACTOR",
    "AuditHook",
    "BatchTerm",
    "BatchTermRun",
    "BookKeepingGradients",
    "ClippedSum",
    "DPRun",
    "DPSettings",
    "GradSampleMode",
    "PerExampleGradients",
    "SampleLoss",
    "check_per_example_objective",
    "clip_and_sum",
    "median_gradient_norm",
    "microbatch_groups",
    "microbatch_notes",
    "noisy_average",
    "parse_mode",
    "per_unit_norms",
    "private_gradient",
    "quiet_backward_hooks",
    "standard_dp_noise_std_with_batch_term",
    "train_dp_vae",
    "unit_clip_norm",
]
