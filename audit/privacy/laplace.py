"""Accounting of the Laplace mechanism per measurement for time series (the trade-off paper, Section
2.3 and 4.2): every value of every window gets Laplace noise scaled to its sensor's range
(:func:`audit.mechanisms.laplace_noise.laplace_perturb_series` adds it).
"""

from __future__ import annotations

from audit.privacy import accountant
from audit.privacy.claim import PrivacyClaim
from audit.privacy.events import ComposedEvent, LaplaceEvent, repeated
from dpvae_core.validation import check_positive, check_positive_int


def max_windows_per_measurement(*, window_length: int, stride: int | None) -> int:
    """How many windows one measurement of a recording appears in, at most: ceil(T / stride).

    Windows start every ``stride`` samples (:func:`audit.datasets.series.windows`); ``None`` is
    non-overlapping windows (1). A measurement at row t lies in the windows whose start is a
    multiple of the stride in [t - T + 1, t], an interval of T integers.
    """
    t = check_positive_int("window_length", window_length)
    if stride is None:
        return 1
    return -(-t // check_positive_int("stride", stride))


def max_perturbations_per_window(*, window_length: int, stride: int | None) -> int:
    """How many times, at most, the T time steps of one window are perturbed in all windows.

    Window j (start j * stride) shares max(0, T - |j - k| * stride) time steps with window k,
    so a window far enough from its recording's ends has
    T + 2 * sum_{m >= 1} max(0, T - m * stride) perturbations of its time steps (T with no
    overlap; 2 T at half overlap); windows near an end have fewer.
    """
    t = check_positive_int("window_length", window_length)
    if stride is None:
        return t
    s = check_positive_int("stride", stride)
    return t + 2 * sum(t - m * s for m in range(1, -(-t // s)))


def laplace_event(
    *, eps_i: float, window_length: int, n_features: int, window_stride: int | None = None
) -> ComposedEvent:
    """One window's releases: each feature's values perturbed, in all copies, eps_i-DP each.

    Per feature, the window's time steps receive at most :func:`max_perturbations_per_window`
    Laplace perturbations in all windows (each eps_i-DP between any two values in range); the
    ``n_features`` features compose: ``((eps_i, perturbations), features)``.
    """
    eps = check_positive("eps_i", eps_i)
    perturbed = max_perturbations_per_window(window_length=window_length, stride=window_stride)
    return repeated(
        repeated(LaplaceEvent(eps), perturbed), check_positive_int("n_features", n_features)
    )


def laplace_claim(
    *,
    eps_i: float,
    window_length: int,
    n_features: int,
    window_stride: int | None = None,
    n_records: int | None = None,
) -> PrivacyClaim:
    """Per-record (per-window) claim of the Laplace mechanism on windows of a recording.

    epsilon = eps_i * F * :func:`max_perturbations_per_window` (T F eps_i for non-overlapping
    windows): by sequential composition over every noisy copy of the window's values, including
    the copies in overlapping windows (``window_stride`` below T). The per-measurement epsilon
    is eps_i * :func:`max_windows_per_measurement`. With ``n_records``,
    ``extra["epsilon_dataset_sum"]`` is |D| times the per-record epsilon (the trade-off paper's
    Table 2 style sum; its MotionSense column used |D| * eps_i, without T * F).

    Notes:
        Adjacency: any two windows (local DP), values inside fixed per-channel ranges.
    """
    eps = check_positive("eps_i", eps_i)
    t = check_positive_int("window_length", window_length)
    f = check_positive_int("n_features", n_features)
    copies = max_windows_per_measurement(window_length=t, stride=window_stride)
    perturbed = max_perturbations_per_window(window_length=t, stride=window_stride)
    extra: dict[str, float | str] = {
        "eps_i": eps,
        "eps_per_measurement": eps * copies,
        "windows_per_measurement": copies,
        "values_per_record": t * f,
        "perturbations_per_record": perturbed * f,
    }
    if copies > 1:
        extra["window_overlap"] = (
            f"stride {window_stride} < window {t}: a measurement is perturbed in up to "
            f"{copies} windows, a window's values {perturbed * f} times in all"
        )
    event = laplace_event(eps_i=eps, window_length=t, n_features=f, window_stride=window_stride)
    epsilon = accountant.pure_epsilon(event)
    if n_records is not None:
        extra["epsilon_dataset_sum"] = check_positive_int("n_records", n_records) * epsilon
        extra["notes"] = (
            "epsilon_dataset_sum: |D| * per-record epsilon (the trade-off paper's Table 2 style)"
        )
    return PrivacyClaim(
        epsilon=epsilon,
        delta=0.0,
        method="ldp-laplace/per-measurement",
        accountant="ldp-composition",
        extra=extra,
        event=event,
    )
