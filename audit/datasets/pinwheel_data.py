"""The pinwheel data set of Johnson et al. (2016), PriVAE's clustering task (Sec. 5.2).

PriVAE uses "the pinwheel dataset from [19] (Johnson et al.), with n = 400 observations,
clustered in 4 spirals", following Mathieu et al. (2019); it states neither the spread nor the
rate. The defaults here are those of Johnson et al.'s SVAE code (``make_pinwheel_data(0.3, 0.05,
num_classes, num_per_class, 0.25)``, coordinates times 10) with PriVAE's n = 400 and 4
spirals. Mathieu et al.'s released experiment (the one PriVAE follows) instead generates the
data with Adams' MATLAB ``pinwheel(0.1, 0.3, 4, 100, 0.25)``, whose argument order swaps the two
spreads: radial std 0.3, tangential std 0.1, unit scale; ``pinwheel(tangential_std=0.1,
scale=1.0)`` reproduces that distribution.
"""

from __future__ import annotations

import numpy as np

from dpvae_core.validation import check_non_negative, check_positive, check_positive_int

#: PriVAE, Section 5.2: n = 400 observations in 4 spirals.
PAPER_N = 400
PAPER_SPIRALS = 4


def pinwheel(
    n: int = PAPER_N,
    *,
    seed: int,
    radial_std: float = 0.3,
    tangential_std: float = 0.05,
    num_classes: int = PAPER_SPIRALS,
    rate: float = 0.25,
    scale: float = 10.0,
) -> tuple[np.ndarray, np.ndarray]:
    """n points of a pinwheel with ``num_classes`` spiral arms, and the arm of each point.

    Johnson et al.'s generator: each point starts as (1 + radial_std * e_1, tangential_std * e_2)
    with e ~ N(0, I), i.e. near (1, 0) with a radial and a tangential spread; the point of arm k
    is rotated by the angle 2 pi k / num_classes + rate * exp(radial coordinate), so that points
    further out turn further (the spiral), and multiplied by ``scale``.

    Args:
        n: number of points; arm sizes differ by at most one (n // num_classes each, the first
            n % num_classes arms one more).
        seed: seed of a ``numpy.random.default_rng`` (no global state is read or changed).
        radial_std: standard deviation along the arm before rotation (in units of the unit
            circle, before ``scale``).
        tangential_std: standard deviation across the arm before rotation.
        num_classes: number of spiral arms; arm centres are equally spaced on the circle.
        rate: radians of extra rotation per unit of exp(radial coordinate).
        scale: factor applied to every coordinate (Johnson et al.: 10).

    Returns:
        points (n, 2) float32 and labels (n,) int64 in [0, num_classes), in a random order.
    """
    check_positive_int("n", n)
    check_positive_int("num_classes", num_classes)
    for name, value in (
        ("radial_std", radial_std),
        ("tangential_std", tangential_std),
        ("rate", rate),
    ):
        check_non_negative(name, value)
    check_positive("scale", scale)
    if seed is None or isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    counts = np.full(num_classes, n // num_classes)
    counts[: n % num_classes] += 1
    labels = np.repeat(np.arange(num_classes, dtype=np.int64), counts)
    features = rng.standard_normal((n, 2)) * np.array([radial_std, tangential_std])
    features[:, 0] += 1.0
    arm_angles = np.linspace(0.0, 2.0 * np.pi, num_classes, endpoint=False)
    angles = arm_angles[labels] + rate * np.exp(features[:, 0])
    cos, sin = np.cos(angles), np.sin(angles)
    # Row vector times [[cos, -sin], [sin, cos]], as Johnson et al.'s einsum('ti,tij->tj').
    points = np.stack(
        [features[:, 0] * cos + features[:, 1] * sin, -features[:, 0] * sin + features[:, 1] * cos],
        axis=1,
    )
    order = rng.permutation(n)
    return (scale * points[order]).astype(np.float32), labels[order]
