"""Accounting of standard DP-Adam / DP-SGD: Poisson-sampled Gaussian releases, Opacus RDP.

The trade-off paper (Section 2 and Table 2) trains with DP-Adam (TensorFlow Privacy) and reports
epsilon at delta = 1/N_train with the classic RDP conversion; Opacus's improved conversion is the
default here and is never larger.
"""

from __future__ import annotations

from audit.privacy import accountant
from audit.privacy.claim import Conversion, PrivacyClaim
from audit.privacy.events import ComposedEvent, GaussianEvent, PoissonSampledEvent, repeated
from audit.privacy.noise_calibration import calibrate_noise_multiplier
from dpvae_core.schedule import dp_sgd_steps
from dpvae_core.validation import (
    check_batch,
    check_delta,
    check_non_negative,
    check_positive_int,
    parse_enum,
)

ACCOUNTANT = "rdp"


def dp_sgd_event(
    *, n_train: int, batch_size: int, epochs: int, noise_multiplier: float
) -> ComposedEvent:
    """DP-SGD's releases: :func:`dp_sgd_steps` Poisson-sampled Gaussians, rate B/N, multiplier z.

    Each step's noisy gradient sum has sensitivity 1 in units of the clip norm C (per-example
    clipping, add/remove one record) and noise std z C: ``GaussianEvent(z)``.
    """
    return repeated(
        PoissonSampledEvent(batch_size / n_train, GaussianEvent(noise_multiplier)),
        dp_sgd_steps(n_train=n_train, batch_size=batch_size, epochs=epochs),
    )


def _epsilon_and_order(
    *,
    n_train: int,
    batch_size: int,
    epochs: int,
    noise_multiplier: float,
    delta: float,
    conversion: Conversion,
) -> tuple[float, float]:
    event = dp_sgd_event(
        n_train=n_train, batch_size=batch_size, epochs=epochs, noise_multiplier=noise_multiplier
    )
    return accountant.rdp_epsilon(event, delta=delta, conversion=conversion)


def _check(n_train: int, batch_size: int, epochs: int, delta: float) -> None:
    check_batch(n_train=n_train, batch_size=batch_size, epochs=epochs)
    check_delta(delta)


def dp_sgd_epsilon(
    *,
    n_train: int,
    batch_size: int,
    epochs: int,
    noise_multiplier: float,
    delta: float,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> float:
    """Epsilon of DP-SGD/DP-Adam with Poisson sampling after ``epochs`` epochs.

    Sample rate ``q = batch_size / n_train`` (``batch_size`` is the expected batch size), steps
    from :func:`dp_sgd_steps`, orders ``RDP_ORDERS``. ``noise_multiplier`` z is the noise std
    over the clip norm; z = 0 gives ``inf``.

    Notes:
        Add/remove-one-record adjacency with per-example clipping (sensitivity = clip norm).
        Valid only for Poisson sampling; shuffled fixed-size batches are not covered.
    """
    _check(n_train, batch_size, epochs, delta)
    check_non_negative("noise_multiplier", noise_multiplier)
    conversion = parse_enum(Conversion, conversion, "conversion")
    return _epsilon_and_order(
        n_train=n_train,
        batch_size=batch_size,
        epochs=epochs,
        noise_multiplier=noise_multiplier,
        delta=delta,
        conversion=conversion,
    )[0]


def noise_multiplier_for_epsilon(
    *,
    target_epsilon: float,
    n_train: int,
    batch_size: int,
    epochs: int,
    delta: float,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> float:
    """Smallest noise multiplier (relative tolerance 1e-6) whose epsilon is <= the target.

    Raises:
        ValueError: for bad inputs or an unreachable target (the message quotes the smallest
            epsilon reachable: the classic conversion never goes below log(1/delta)/1023).
    """
    _check(n_train, batch_size, epochs, delta)
    conversion = parse_enum(Conversion, conversion, "conversion")
    return calibrate_noise_multiplier(
        lambda z: _epsilon_and_order(
            n_train=n_train,
            batch_size=batch_size,
            epochs=epochs,
            noise_multiplier=z,
            delta=delta,
            conversion=conversion,
        )[0],
        target_epsilon=target_epsilon,
    )


def cdp_claim(
    *,
    n_train: int,
    batch_size: int,
    epochs: int,
    noise_multiplier: float,
    delta: float | None = None,
    conversion: Conversion | str = Conversion.IMPROVED,
) -> PrivacyClaim:
    """The DP-Adam claim at ``delta`` (default ``1/n_train``), with both conversions in extra."""
    if delta is None:
        delta = 1 / check_positive_int("n_train", n_train)
    _check(n_train, batch_size, epochs, delta)
    check_non_negative("noise_multiplier", noise_multiplier)
    conversion = parse_enum(Conversion, conversion, "conversion")
    both = {
        c: _epsilon_and_order(
            n_train=n_train,
            batch_size=batch_size,
            epochs=epochs,
            noise_multiplier=noise_multiplier,
            delta=delta,
            conversion=c,
        )
        for c in Conversion
    }
    epsilon, order = both[conversion]
    event = dp_sgd_event(
        n_train=n_train, batch_size=batch_size, epochs=epochs, noise_multiplier=noise_multiplier
    )
    return PrivacyClaim(
        epsilon=epsilon,
        delta=delta,
        method=f"opacus-rdp/{conversion.value}",
        accountant=ACCOUNTANT,
        extra={
            "noise_multiplier": float(noise_multiplier),
            "sample_rate": batch_size / n_train,
            "steps": dp_sgd_steps(n_train=n_train, batch_size=batch_size, epochs=epochs),
            "rdp_order": order,
            **{f"epsilon_{c.value}": eps for c, (eps, _) in both.items()},
        },
        event=event,
    )
