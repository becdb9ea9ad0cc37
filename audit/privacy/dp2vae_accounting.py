"""Accounting of DP2-VAE (the DP2-VAE paper, Jiang et al., Algorithms 1 and 2, Theorem 3.1).

D_train is split into K disjoint subsets by a keyed hash of each record (``models.dp.dp2vae_loop``).
Stage 1 pre-trains one encoder per subset non-privately; stage 2 re-initialises the decoder and
runs T steps, each choosing a subset k uniformly at random, drawing a Poisson batch of at most
B_max records from it, releasing ``(sum_i clip_C(g_i) + N(0, (sigma C)^2 I)) / B`` for the
decoder's per-example gradients (encoder k in the forward pass) and updating encoder k
non-privately. Only the decoder is released. Two epsilons:

paper (:func:`paper_theorem_3_1_epsilon`): Theorem 3.1 charges a step as a Gaussian of
    sensitivity 2C/B on the mean with std sigma C / B, i.e. (alpha, 2 alpha / sigma^2)-RDP,
    noise multiplier sigma / 2. Algorithm 2 (line 16) computes epsilon as ``Eps(K, sigma, T,
    delta)`` with an RDP accountant (Appendix C.2: pyvacy, TensorFlow Privacy's analysis); the
    only sampling rate its arguments define is the probability 1/K that a step queries a given
    subset, the rate GS-WGAN uses too. So: T Poisson-sampled Gaussians at q = 1/K, noise
    multiplier sigma / 2. It is NOT a bound for this code (see Notes).
valid (:func:`dp2vae_epsilon`, the claim's ``epsilon``): T selection-amplified Gaussians at
    q = 1/K with noise multiplier sigma / (2 B_max), amplified by joint convexity, not by the
    Poisson-subsampled Gaussian bound (see Notes).

Notes:
    Adjacency: add/remove one record r of D_train. r's subset k* is a keyed hash of (seed, r)
    alone, so no other record changes subset; subset choices, Poisson coins (one generator per
    step), reparameterisation noise and DP noise are drawn independently of the data.

    Sensitivity: encoder k* is a non-private function of all of D_k* (stage 1 and every earlier
    stage-2 step on k*), so adding r moves the latent codes, hence the clipped decoder
    gradients, of every record of a batch drawn from k*, not only r's own. Each clipped
    per-example gradient lies in the C ball, so each can move by 2C; a batch holds at most
    B_max records (the code truncates larger Poisson batches), so the clipped sum moves by at
    most 2 B_max C, whether or not r itself is in the batch (when it is not, the others still
    moved). The DP2-VAE paper's proof (Eq. 12-13) takes two batches differing in one entry with
    everything else fixed, which ignores the encoder: it counts 2C where 2 B_max C is due.
    A step that chooses k != k* has sensitivity 0 (same subset, same encoder, same coins).

    Sampling: k* is chosen with probability q = 1/K independently per step. Condition on every
    data-independent coin c (choices, Poisson coins, reparameterisation noise): the run is then
    an adaptive composition of Gaussians whose sensitivity is 2 B_max C on the m(c) steps that
    chose k* and 0 elsewhere, so exp((a-1) D_a(P_c || Q_c)) <= exp((a-1) m rho(a)),
    rho(a) = a / (2 z^2), z = sigma / (2 B_max) (Mironov 2017, Prop. 1). The output is the
    mixture over c of the same law under both datasets; exp((a-1) D_a) is jointly convex, and m
    is Binomial(T, q), so the RDP is T / (a-1) * log(1 - q + q exp((a-1) rho(a))). This needs
    neither independence of the hidden encoder state from the past releases nor any relation
    between the subsets. The Poisson-subsampled Gaussian bound (Mironov, Talwar and Zhang 2019)
    at q = 1/K is not available: it needs the neighbour without r to produce exactly the
    "not sampled" component, P = (1-q) N(mu) + q N(mu + v), Q = N(mu). Here both neighbours
    are mixtures (1-q) R + q N(mu_{k*}(D)) and (1-q) R + q N(mu_{k*}(D')), where R, the other
    subsets' releases, is unrelated to mu_{k*}; with R far from both (possible: the clipped
    sums span a ball of radius B_max C against noise sigma C) the divergence reaches the
    joint-convexity value, above the subsampled-Gaussian one (the tests integrate one such
    case). Within-subset Poisson sampling gives no amplification (see Sensitivity), so its
    rate, min(1, B / |D_k|), enters neither bound.

    GS-WGAN (Chen, Orekondy and Fritz 2020) has the same shape: N_d discriminators trained
    non-privately on disjoint subsets, the generator trained through sanitised per-sample
    upstream gradients, each with its own noise N(0, sigma^2 C^2). Its Theorem 1 charges a step
    (alpha, 2 B alpha / sigma^2): all B upstream gradients of a step may change, i.e. it does
    account for the non-private discriminator, where the DP2-VAE paper charges one record. Its code
    (evaluation/privacy_analysis.py) then composes n_steps * B subsampled Gaussians at
    q = 1/N_d (autodp's subsampling bound), which treats the B releases of one step as
    independently subsampled and the other discriminators' outputs as the "not sampled" branch;
    with one selection event per step and unrelated subsets, joint convexity as here is the
    bound that holds. With noise on the sum (not per sample) the step's sensitivity grows like
    B (2 B_max C), not like sqrt(B) as in GS-WGAN's per-sample noise.
"""

from __future__ import annotations

import math

import numpy as np

from audit.privacy.claim import Conversion, PrivacyClaim
from audit.privacy.dp_sgd_accounting import ACCOUNTANT
from audit.privacy.noise_calibration import calibrate_noise_multiplier
from audit.privacy.rdp import RDP_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp
from dpvae_core.validation import check_delta, check_non_negative, check_positive_int, parse_enum

PAPER_NOTE = (
    "the DP2-VAE paper's Theorem 3.1: NOT a bound for this code. It charges each decoder step a "
    "Gaussian of sensitivity 2C/B (noise multiplier sigma/2), Poisson-subsampled at q = 1/K; but "
    "the non-private encoder of the record's subset moves every clipped gradient of a batch from "
    "that subset (sensitivity 2 B_max C), and the choice of one of K fixed subsets is not "
    "Poisson subsampling (amplification only by joint convexity)."
)


def step_sensitivity(*, max_batch_size: int) -> float:
    """L2 sensitivity of one step's clipped decoder-gradient sum, in units of C: 2 B_max.

    Every clipped per-example gradient of a batch from the record's subset can move anywhere in
    the C ball (module Notes), and a batch holds at most ``max_batch_size`` records.
    """
    return 2.0 * check_positive_int("max_batch_size", max_batch_size)


def selection_amplified_gaussian_rdp(
    *, selection_probability: float, noise_multiplier: float, steps: int
) -> np.ndarray:
    """RDP at each of ``RDP_ORDERS`` of ``steps`` Gaussians, each touching the record w.p. q.

    ``T / (a - 1) * log(1 - q + q * exp((a - 1) * a / (2 z^2)))``: joint convexity of
    exp((a-1) D_a) over the Binomial(T, q) number of steps that touch the record (module
    Notes). Never below the Poisson-subsampled Gaussian RDP at the same q and z; equals T
    unsampled Gaussians at q = 1. ``noise_multiplier`` z is the std over the step's L2
    sensitivity; z = 0 gives infinite RDP.
    """
    q = selection_probability
    if not (isinstance(q, (int, float)) and 0 < q <= 1):
        raise ValueError(f"selection_probability must lie in (0, 1], got {q!r}")
    z = check_non_negative("noise_multiplier", noise_multiplier)
    check_positive_int("steps", steps)
    orders = np.asarray(RDP_ORDERS)
    if z == 0:
        return np.full(orders.shape, math.inf)
    exponent = (orders - 1) * orders / (2 * z * z)
    if q == 1:
        per_step = exponent / (orders - 1)
    else:
        per_step = np.logaddexp(math.log1p(-q), math.log(q) + exponent) / (orders - 1)
    return steps * per_step


def _check_schedule(n_train: int, subsets: int, steps: int, noise_multiplier: float) -> None:
    check_positive_int("n_train", n_train)
    check_positive_int("subsets", subsets)
    check_positive_int("steps", steps)
    check_non_negative("noise_multiplier", noise_multiplier)
    if subsets > n_train:
        raise ValueError(
            f"subsets K must not exceed n_train (every subset should be able to hold a record), "
            f"got subsets={subsets!r} with n_train={n_train!r}"
        )


def _valid(*, subsets: int, steps: int, noise_multiplier: float, max_batch_size: int, delta: float):
    z = noise_multiplier / step_sensitivity(max_batch_size=max_batch_size)
    rdp = selection_amplified_gaussian_rdp(
        selection_probability=1 / subsets, noise_multiplier=z, steps=steps
    )
    return {c: rdp_to_epsilon(rdp=rdp, delta=delta, conversion=c) for c in Conversion}


def dp2vae_epsilon(
    *,
    n_train: int,
    subsets: int,
    steps: int,
    noise_multiplier: float,
    max_batch_size: int,
    delta: float,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> float:
    """Epsilon valid for ``models.dp.dp2vae_loop`` after ``steps`` stage-2 steps (module Notes).

    Args:
        n_train: |D_train| (only checked: K <= n_train).
        subsets: K; a step touches the record's subset with probability 1/K.
        steps: T, stage-2 decoder steps.
        noise_multiplier: sigma, noise std over the clip norm C.
        max_batch_size: B_max, the cap on a stage-2 batch; the step's sensitivity is 2 B_max C.
        delta: target delta in (0, 1).
    """
    _check_schedule(n_train, subsets, steps, noise_multiplier)
    check_delta(delta)
    conversion = parse_enum(Conversion, conversion, "conversion")
    return _valid(
        subsets=subsets,
        steps=steps,
        noise_multiplier=noise_multiplier,
        max_batch_size=max_batch_size,
        delta=delta,
    )[conversion][0]


def paper_theorem_3_1_epsilon(
    *,
    subsets: int,
    steps: int,
    noise_multiplier: float,
    delta: float,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> float:
    """The DP2-VAE paper's epsilon: T Poisson-subsampled Gaussians at q = 1/K, noise multiplier
    sigma/2.

    Theorem 3.1 ((alpha, 2 alpha / sigma^2)-RDP per step: sensitivity 2C/B, std sigma C / B)
    with the sampling rate of Algorithm 2's ``Eps(K, sigma, T, delta)``. Reproduced for the
    record; NOT a bound for this code (module Notes).
    """
    check_positive_int("subsets", subsets)
    check_non_negative("noise_multiplier", noise_multiplier)
    check_delta(delta)
    conversion = parse_enum(Conversion, conversion, "conversion")
    rdp = sampled_gaussian_rdp(
        sample_rate=1 / subsets, noise_multiplier=noise_multiplier / 2, steps=steps
    )
    return rdp_to_epsilon(rdp=rdp, delta=delta, conversion=conversion)[0]


def dp2vae_noise_for_epsilon(
    *,
    target_epsilon: float,
    n_train: int,
    subsets: int,
    steps: int,
    max_batch_size: int,
    delta: float,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> float:
    """Smallest sigma (relative tolerance 1e-6) with ``dp2vae_epsilon(sigma) <= target``.

    Raises:
        ValueError: for bad inputs or an unreachable target (quoting the reachable floor).
    """
    _check_schedule(n_train, subsets, steps, 1.0)
    check_positive_int("max_batch_size", max_batch_size)
    check_delta(delta)
    conversion = parse_enum(Conversion, conversion, "conversion")
    return calibrate_noise_multiplier(
        lambda sigma: _valid(
            subsets=subsets,
            steps=steps,
            noise_multiplier=sigma,
            max_batch_size=max_batch_size,
            delta=delta,
        )[conversion][0],
        target_epsilon=target_epsilon,
    )


def dp2vae_claim(
    *,
    n_train: int,
    subsets: int,
    steps: int,
    noise_multiplier: float,
    max_batch_size: int,
    delta: float | None = None,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> PrivacyClaim:
    """The DP2-VAE claim at ``delta`` (default ``1/n_train``): the valid bound as ``epsilon``.

    ``extra`` holds both conversions of the valid bound, the DP2-VAE paper's Theorem 3.1 value
    (``epsilon_paper_theorem_3_1``) with its label (``paper_note``), the step's sensitivity in
    units of C, the effective noise multiplier sigma / (2 B_max), q = 1/K and T.
    """
    if delta is None:
        delta = 1 / check_positive_int("n_train", n_train)
    _check_schedule(n_train, subsets, steps, noise_multiplier)
    check_delta(delta)
    conversion = parse_enum(Conversion, conversion, "conversion")
    both = _valid(
        subsets=subsets,
        steps=steps,
        noise_multiplier=noise_multiplier,
        max_batch_size=max_batch_size,
        delta=delta,
    )
    epsilon, order = both[conversion]
    sensitivity = step_sensitivity(max_batch_size=max_batch_size)
    return PrivacyClaim(
        epsilon=epsilon,
        delta=delta,
        method=f"dp2vae-joint-convexity-rdp/{conversion.value}",
        accountant=ACCOUNTANT,
        extra={
            "noise_multiplier": float(noise_multiplier),
            "subsets": subsets,
            "selection_probability": 1 / subsets,
            "steps": steps,
            "max_batch_size": max_batch_size,
            "sensitivity_in_clip_norms": sensitivity,
            "effective_noise_multiplier": noise_multiplier / sensitivity,
            "rdp_order": order,
            **{f"epsilon_{c.value}": eps for c, (eps, _) in both.items()},
            "epsilon_paper_theorem_3_1": paper_theorem_3_1_epsilon(
                subsets=subsets,
                steps=steps,
                noise_multiplier=noise_multiplier,
                delta=delta,
                conversion=conversion,
            ),
            "paper_note": PAPER_NOTE,
        },
    )
