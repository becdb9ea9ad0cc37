"""Accounting of DP image pixelization (Liyue Fan, "Image pixelization with differential privacy",
DBSec 2018), the image LDP mechanism of the trade-off paper (Section 2.3): b x b block means plus
Laplace noise (added by :func:`audit.mechanisms.pixelization_noise.pixelize`). Scale, geometry,
event and claim; no torch.
"""

from __future__ import annotations

import math

from audit.privacy import accountant
from audit.privacy.claim import PrivacyClaim
from audit.privacy.events import LaplaceEvent
from dpvae_core.validation import check_positive, check_positive_int


def valid_block_sizes(height: int, width: int) -> tuple[int, ...]:
    """Block sizes b that tile an image of ``height`` x ``width``: the common divisors."""
    check_positive_int("height", height)
    check_positive_int("width", width)
    g = math.gcd(height, width)
    return tuple(b for b in range(1, g + 1) if g % b == 0)


def pixelization_scale(*, eps_i: float, block: int, neighborhood: int) -> float:
    """Laplace scale m / (b^2 eps_i) on the [0, 1] pixel scale (255 m / (b^2 eps_i) on 0..255).

    The L1 sensitivity of all block means of one channel, for images differing in at most m
    pixels, is m / b^2 (Fan 2018).
    """
    eps = check_positive("eps_i", eps_i)
    b = check_positive_int("block", block)
    m = check_positive_int("neighborhood", neighborhood)
    return m / (b * b * eps)


def check_geometry(*, height: int, width: int, block: int, neighborhood: int) -> None:
    """Refuse a block side b that does not tile H x W, or an m outside 1..H*W (ValueError)."""
    check_positive_int("height", height)
    check_positive_int("width", width)
    check_positive_int("block", block)
    check_positive_int("neighborhood", neighborhood)
    if height % block or width % block:
        valid = ", ".join(map(str, valid_block_sizes(height, width)))
        raise ValueError(
            f"pixel block b={block} does not tile a {height}x{width} image (b must divide both "
            f"sides); valid b: {valid}"
        )
    if neighborhood > height * width:
        raise ValueError(
            f"neighborhood m={neighborhood} exceeds the {height * width} pixels of a "
            f"{height}x{width} image; choose 1..{height * width}"
        )


def pixelization_event(
    *, eps_i: float, channels: int, height: int, width: int, block: int, neighborhood: int
) -> LaplaceEvent:
    """One image's release for ANY two images: one Laplace mechanism on all its block means.

    Its epsilon is ``c * eps_i * H * W / m``, for every block side b (64x64x3, m = 64:
    192 eps_i).

    Notes:
        Adjacency: any two records (local DP). Per channel there are (H/b)(W/b) block means, each
        the mean of b^2 pixels in [0, 1], so each moves by at most 1 between any two images and
        the L1 sensitivity of one channel's means is (H/b)(W/b) = H W / b^2. The Laplace scale
        is m / (b^2 eps_i) (:func:`pixelization_scale`), so one channel is
        (H W / b^2) / (m / (b^2 eps_i)) = eps_i H W / m -DP; b cancels. The c channels get
        independent noise of the same scale, so all c (H/b)(W/b) means are one Laplace mechanism
        of L1 sensitivity c H W / b^2: c eps_i H W / m (the same number as composing the c
        channels). Clipping to [0, 1] and expanding blocks back to pixels are post-processing.
        Fan's eps_i covers only images differing in at most m pixels (the m-neighbourhood):
        c * eps_i against those.
    """
    eps = check_positive("eps_i", eps_i)
    c = check_positive_int("channels", channels)
    check_geometry(height=height, width=width, block=block, neighborhood=neighborhood)
    return LaplaceEvent(c * eps * height * width / neighborhood)


def pixelization_epsilon(
    *, eps_i: float, channels: int, height: int, width: int, block: int, neighborhood: int
) -> float:
    """Epsilon of :func:`audit.mechanisms.pixelization_noise.pixelize` for ANY two images
    (H x W x c, values in [0, 1]): ``c * eps_i * H * W / m``; see :func:`pixelization_event`.
    """
    return accountant.pure_epsilon(
        pixelization_event(
            eps_i=eps_i,
            channels=channels,
            height=height,
            width=width,
            block=block,
            neighborhood=neighborhood,
        )
    )


def pixelization_claim(
    *,
    eps_i: float,
    channels: int,
    height: int,
    width: int,
    neighborhood: int,
    block: int = 1,
    n_records: int | None = None,
) -> PrivacyClaim:
    """Per-record claim of pixelization for any two records: :func:`pixelization_epsilon`.

    ``extra`` keeps, labelled, the m-neighbourhood epsilon (channels * eps_i: Fan's guarantee,
    only against images differing in at most m pixels) and, with ``n_records``, the trade-off
    paper's Table 2 figure |D| * channels * eps_i (a dataset-wide sum of m-neighbourhood epsilons,
    not a per-record guarantee).
    """
    event = pixelization_event(
        eps_i=eps_i,
        channels=channels,
        height=height,
        width=width,
        block=block,
        neighborhood=neighborhood,
    )
    epsilon = accountant.pure_epsilon(event)
    eps, c = float(eps_i), int(channels)
    extra: dict[str, float | str] = {
        "eps_i": eps,
        "channels": c,
        "image_pixels": f"{height}x{width}",
        "pixel_block": block,
        "neighborhood_pixels": neighborhood,
        "epsilon_any_two_records": "channels * eps_i * H * W / m (L1 sensitivity of the block "
        "means over the Laplace scale)",
        "epsilon_m_neighbourhood": c * eps,
        "epsilon_m_neighbourhood_note": "Fan's channels * eps_i, only against images differing "
        "in at most m pixels, not the epsilon column",
    }
    if n_records is not None:
        extra["epsilon_dataset_sum"] = check_positive_int("n_records", n_records) * c * eps
        extra["notes"] = (
            "epsilon_dataset_sum: the |D| * channels * eps_i of the trade-off paper's Table 2, a "
            "dataset-wide sum of m-neighbourhood epsilons, not a per-record bound"
        )
    return PrivacyClaim(
        epsilon=epsilon,
        delta=0.0,
        method="ldp-pixelization/laplace/any-two-records",
        accountant="ldp-composition",
        extra=extra,
        event=event,
    )
