"""One row of ``runs.csv``: one (dataset, mechanism, parameter, seed, attack, distance, variant).

:class:`Row` is the record the pipeline builds for each result of each attack of a cell; its
fields, in order, are the CSV's columns (:data:`COLUMNS`), so no module lists them by hand.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Row:
    """A cell's measurements under one attack result, with the cell's configuration and claim.

    Attributes (the columns of ``runs.csv``, in this order; "cell" = the same for every row of
    the cell):
        dataset, mech, param_name, param_value, seed: the cell's grid point (param_value NaN for
            the baseline ``none``).
        attack: the attack's registry name (``reconstruction``).
        distance: what the attack compared (:class:`attacks.distances.Distance` or
            :class:`attacks.attack.Measure` value, e.g. ``mse``).
        variant: how the scores were formed (:class:`attacks.attack.Variant` value; ``mean`` for
            the reconstruction attack).
        profile: the profile's name.
        mi_ap, mi_auc, tpr_at_fpr_1pct, tpr_at_fpr_01pct: the attack's metrics
            (:class:`attacks.metrics.AttackMetrics`); a TPR at an FPR is NaN where D_atk holds
            fewer than 1/FPR non-members (it would be TPR at zero false positives), and
            ``tpr_note`` says so.
        mi_ap_low, mi_ap_high, mi_auc_low, mi_auc_high: 95 % bootstrap intervals (members and
            non-members resampled separately; :func:`attacks.uncertainty.bootstrap_intervals`).
        mi_ap_null_q50, mi_ap_null_q95: a blind attacker's MI AP quantiles at the row's member
            and non-member counts (:func:`attacks.uncertainty.mi_ap_null`); ``beyond_chance``:
            mi_ap above mi_ap_null_q95 (None in older cells).
        tpr_at_fpr_1pct_low/high, tpr_at_fpr_01pct_low/high: two-sided 95 % Clopper-Pearson
            intervals of the TPRs over the members (NaN where the TPR is).
        worst_case: True on the one row of the cell whose (attack, distance, variant)
            :func:`attacks.worst_case.held_out_worst_case` picks (highest MI AP on a seeded half
            of D_atk, seeded from the cell's attack seed), False on the others; None where D_atk
            holds fewer than two members or non-members.
        worst_mi_ap, worst_tpr_at_fpr_1pct (cell): the chosen result's MI AP and TPR at FPR 1 %
            on the other half of D_atk, which played no part in the choice (unbiased, at half
            the records); the figures to read as the cell's worst case over its attacks; the
            TPR is NaN below 100 non-members in that half.
        worst_mi_ap_low/high, worst_mi_ap_null_q50/q95, worst_beyond_chance (cell): the held-out
            worst case's bootstrap interval and chance quantiles at the half's counts.
        attacker_sees: what of the release the attack read (``encoder and decoder``, ``decoder
            only``, ``samples only``); side_reference_records, side_reference_models: how many
            reference records and models this result read (0: none), side_models_trained: how
            those models were trained (:mod:`audit.threat_columns`).
        acc: the target classifier's accuracy on real D_test, trained on D_gen; acc_base
            1 / #classes; acc_real: the same classifier trained on real D_train.
        utility_valid: whether the baseline's accuracy is above chance; filled when results are
            collected (:func:`audit.results.collect_rows`), None in the cell's own rows.
        n_test, gen_records: |D_test| and |D_gen|.
        train_test_gap: the target VAE's loss on real D_test minus on real D_train.
        acc_majority: the share of D_test's most common class, what a classifier that always
            answers that class scores (above ``acc_base`` = 1/#classes on unbalanced test sets:
            0.278 on LFW20, George W Bush's share).
        train_diverged: whether the target VAE's training diverged (a non-finite epoch loss, or
            one above :data:`audit.pipeline.DIVERGENCE_FACTOR` times the first epoch's): such a
            row measures a broken model, and ``check`` fails it.
        epsilon, delta, epsilon_method, accountant: the privacy claimed, and how.
        privacy_notes: ``key=value`` notes joined by ``"; "``, including what is released
            outside the accounting.
        phi: the trade-off score against the baseline (:func:`audit.tradeoff.phi_clipped`:
            paper 003's Eq. 2 with MI AP clipped at 0.5 and accuracy at chance, the larger of
            1/#classes and the majority rate, so a setting at chance accuracy has phi <= 1);
            filled when results are collected, NaN in the cell's own rows, and NaN, with
            ``phi_note`` saying why, where the baseline's utility is not above chance or its
            attack is not beyond its chance band.
        phi_paper: paper 003's raw Eq. 2 (ACC_base = 1/#classes, no clipping), for comparison
            with the paper's figures only: it credits settings that keep nothing.
        phi_note: why ``phi`` / ``phi_worst`` are empty where they are ('' otherwise).
        epochs, batch_size, lr, latent_dim: the target VAE's training settings.
        n_train, n_attack: |D_train| (after the cap) and |D_atk|.
        attack_samples: samples behind each score (the reconstruction attack's N).
        clip_norm: the DP clip norm (NaN where none), wall_s: the cell's seconds.
        config_hash, code_version: the cell's identity and the code that ran it.
        attack_members, attack_nonmembers: D_atk's members and non-members.
        attack_nonfinite: records whose score was NaN or infinite (a diverged model's output),
            ranked as :meth:`attacks.attack.AttackResult.with_finite_scores` says.
        baseline_hash: the config hash of the cell's non-private baseline (phi's reference).
        epsilon_lower, epsilon_lower_kind, epsilon_lower_m, epsilon_lower_ceiling: the cell's
            empirical lower bound on epsilon at 95 % confidence (``--canary-audit``;
            :mod:`audit.empirical.cell_audit`), how it was obtained (``local-worst-case``,
            ``one-run-gradient``, ``not-audited``), its draws M per input or canaries m, and the
            most that audit could prove; NaN / empty / 0 where not audited.
            For DP-SGD mechanisms these are the white-box bound (gradient canaries).
        epsilon_lower_estimator: the estimator of ``epsilon_lower`` (``one-run``: Steinke et
            al. 2023; ``local-worst-case``: Clopper-Pearson on worst-case inputs;
            :class:`audit.empirical.estimators.Estimator`).
        epsilon_lower_fdp, epsilon_lower_input_fdp: the one-run f-DP bound (Mahloujifar et al.,
            assumes a Gaussian-shaped trade-off curve) over the same gradient / input canary
            guesses; NaN where not run.
        epsilon_lower_input, epsilon_lower_input_m, epsilon_lower_input_ceiling: the bound a
            user's adversary gets (the one-run audit with m input canaries scored by the
            strongest attack of the release), m and its ceiling; NaN / 0 where not run.
        epsilon_lower_attack, epsilon_lower_attack_ceiling, epsilon_lower_attack_note: this
            attack's own scores on D_atk read as a one-run audit (95 % confidence, at the
            claim's delta; :mod:`audit.empirical.attack_bound`), the most it could prove, and
            how it was obtained or why it is NaN; ``check`` fails a row whose bound exceeds
            its claim.
        latent_hoyer, latent_mmd, latent_mmd_sparse: paper 004's Section 5.1 metrics of the
            target VAE's codes of D_train (:func:`models.latent_metrics.latent_summary`): the
            Hoyer sparsity of the encoder means, and MMD^2 between one q(z | x) sample per
            record and the model's own prior (N(0, I), pinwheel's mixture), and the sparse
            prior; NaN where undefined.
        phi_worst (cell): phi of the cell's held-out worst case (``worst_mi_ap``) against its
            baseline's held-out worst case (clipped as ``phi``); filled when results are
            collected, NaN where either cell has no worst case, the utility axis is invalid or
            the baseline's worst case is not beyond its chance band (``phi_note``).
        phi_worst_paper (cell): paper 003's raw Eq. 2 at the held-out worst cases.
        dcr_samples, dcr_share, dcr_expected_share, dcr_p_value, dcr_passes (cell): the
            distance-to-closest-record baseline of a release audited by ``benchmark.py attack``
            (:func:`attacks.dcr.dcr_baseline`): how many samples were checked, the share of them
            closer to a member than to any non-member, that share for a generator that never
            saw the members, the one-sided binomial p-value, and whether DCR passes (no excess
            at 5 %); 0 / NaN / None where no samples were checked (every sweep cell).
    """

    dataset: str
    mech: str
    param_name: str
    param_value: float
    seed: int
    attack: str
    distance: str
    variant: str
    profile: str
    mi_ap: float
    mi_auc: float
    tpr_at_fpr_1pct: float
    tpr_at_fpr_01pct: float
    mi_ap_low: float = math.nan
    mi_ap_high: float = math.nan
    mi_auc_low: float = math.nan
    mi_auc_high: float = math.nan
    mi_ap_null_q50: float = math.nan
    mi_ap_null_q95: float = math.nan
    beyond_chance: bool | None = None
    tpr_at_fpr_1pct_low: float = math.nan
    tpr_at_fpr_1pct_high: float = math.nan
    tpr_at_fpr_01pct_low: float = math.nan
    tpr_at_fpr_01pct_high: float = math.nan
    tpr_note: str = ""
    worst_case: bool | None = None
    worst_mi_ap: float = math.nan
    worst_mi_ap_low: float = math.nan
    worst_mi_ap_high: float = math.nan
    worst_mi_ap_null_q50: float = math.nan
    worst_mi_ap_null_q95: float = math.nan
    worst_beyond_chance: bool | None = None
    worst_tpr_at_fpr_1pct: float = math.nan
    attacker_sees: str = ""
    side_reference_records: int = 0
    side_reference_models: int = 0
    side_models_trained: str = ""
    acc: float
    acc_base: float
    acc_real: float
    utility_valid: bool | None = None
    n_test: int
    gen_records: int
    train_test_gap: float
    acc_majority: float = math.nan
    train_diverged: bool | None = None
    epsilon: float
    delta: float
    epsilon_method: str
    accountant: str
    privacy_notes: str
    phi: float = math.nan
    phi_paper: float = math.nan
    phi_note: str = ""
    epochs: int
    batch_size: int
    lr: float
    latent_dim: int
    n_train: int
    n_attack: int
    attack_samples: int
    clip_norm: float
    wall_s: float
    config_hash: str
    code_version: str
    attack_members: int
    attack_nonmembers: int
    attack_nonfinite: int = 0
    baseline_hash: str
    epsilon_lower: float = math.nan
    epsilon_lower_estimator: str = ""
    epsilon_lower_fdp: float = math.nan
    epsilon_lower_input_fdp: float = math.nan
    epsilon_lower_kind: str = ""
    epsilon_lower_m: int = 0
    epsilon_lower_ceiling: float = math.nan
    epsilon_lower_input: float = math.nan
    epsilon_lower_input_m: int = 0
    epsilon_lower_input_ceiling: float = math.nan
    epsilon_lower_attack: float = math.nan
    epsilon_lower_attack_ceiling: float = math.nan
    epsilon_lower_attack_note: str = ""
    latent_hoyer: float = math.nan
    latent_mmd: float = math.nan
    latent_mmd_sparse: float = math.nan
    phi_worst: float = math.nan
    phi_worst_paper: float = math.nan
    dcr_samples: int = 0
    dcr_share: float = math.nan
    dcr_expected_share: float = math.nan
    dcr_p_value: float = math.nan
    dcr_passes: bool | None = None

    def __post_init__(self) -> None:
        for name in ("attack", "distance", "variant"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or "_" in value:
                raise ValueError(
                    f"{name} must be a non-empty name without '_' (score files are keyed "
                    f"scores_<attack>_<distance>), got {value!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        """The row as ``rows.json`` stores it: every field, in column order."""
        return asdict(self)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Row))
"""The columns of ``runs.csv`` a cell writes, in order."""

COLLECTED_COLUMNS: tuple[str, ...] = ("run_hash", "setting_hash", "precision")
"""Columns added when rows are collected from the cells (:func:`audit.results.collect_rows`)."""

GRID_POINT: tuple[str, ...] = ("dataset", "mech", "param_name", "param_value", "seed")
"""What names a row's cell within a run (with the run's profile)."""

RESULT_KEY: tuple[str, ...] = ("attack", "distance", "variant")
"""What tells a cell's rows apart: one row per attack result."""

PAPER_ATTACK = "reconstruction"
"""The trade-off paper's attack: what a cell runs by default where its release allows it, what a
threshold entry that names no attack limits, and the attack whose results the report labels by
distance alone."""
PLAIN_VARIANT = "mean"
"""The reconstruction attack's only variant (a mean over latent samples), left out of its score
keys."""
