"""The noisy-step schedule of a DP-SGD run, shared by the DP training loops and the accounting."""

from __future__ import annotations

import math

from dpvae_core.validation import check_batch


def dp_sgd_steps(*, n_train: int, batch_size: int, epochs: int) -> int:
    """Number of noisy steps of a run: ``ceil(epochs * n_train / batch_size)``.

    This is TensorFlow Privacy's ``compute_dp_sgd_privacy`` convention, the one behind the trade-off
    paper's Table 2: it reproduces 56.41 / 43.31 / 15.73 to within 0.15 %. Counting
    ``epochs * ceil(n_train / batch_size)`` is 0.3 % off and ``epochs * (n_train // batch_size)``
    2.3 % off. Note that Opacus's ``DPDataLoader.from_data_loader`` runs ``ceil(N/B)`` steps
    per epoch at sample rate ``1/ceil(N/B)``; a training loop should report what it ran through
    its frozen training record rather than this schedule.
    """
    check_batch(n_train=n_train, batch_size=batch_size, epochs=epochs)
    return math.ceil(epochs * n_train / batch_size)
