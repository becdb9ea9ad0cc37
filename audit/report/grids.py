"""The report's reconstruction and generated-sample grids (the trade-off paper, Figure 6), from the
saved models and attacked records ``cells/<hash>/{config.json, model.pt, attack_index.npz}`` of one
seed, read through :mod:`audit.results`; the records themselves come from the dataset
(:mod:`audit.datasets`). Nothing of a cell is recomputed.

Images are drawn as image grids (:func:`audit.report.record_figures.image_grid`), sensor series as
line plots (:func:`audit.report.record_figures.series_grid`: one panel per record, one line per
channel). Rows are the noise levels of one mechanism under the non-private baseline; columns are
attacked members and non-members (unperturbed D_atk records of the cell, as its ``attack_index.npz``
names them, classes in turn) or generated samples per class. Generation follows the model family
(:mod:`models.factory`, :mod:`models.generation`): images decode z ~ N(0, I) with the label; series
decode z ~ q(z|x) of a real D_train record of the class (the pipeline's class-specific sampling;
under ldp and vae-ldp the pipeline drew from the perturbed records, which the report does not
recompute). A cell whose inputs are missing or do not fit is left out with a note in ``skipped``; a
cell finished before ``attack_index.npz`` existed is left out of the grids with a
note to rerun it with ``--overwrite``.
"""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch import nn

from audit import results
from audit.cell.membership import AttackIndex
from audit.config import CellConfig
from audit.datasets import Dataset, dataset_modality, load_dataset
from audit.mechanisms import BASELINE, find_mechanism
from audit.report.record_figures import image_grid, series_grid
from audit.report.skips import skip
from audit.report.stats import format_epsilon
from audit.results import load_cell_config
from dpvae_core.records import Modality
from models.factory import model_family
from models.generation import Generation, generate
from models.lstm_vae import without_dp_lstm_aliases
from models.training import Pair

log = logging.getLogger(__name__)

N_RECORDS = 4  # members and non-members per reconstruction grid
#: What a stale, foreign or damaged cell raises while it is loaded for the grids.
CELL_ERRORS = (ValueError, KeyError, TypeError, OSError, RuntimeError, pickle.UnpicklingError)
GRID_KIND = {Modality.IMAGE: "image", Modality.SERIES: "series", Modality.POINTS: "points"}


def _noise_note(mech: str) -> str:
    """What a row label's symbol means (the mechanism's parameter description), so that z (the
    DP noise multiplier) is not read as the latent; empty for the baseline."""
    mechanism = find_mechanism(mech)
    about = mechanism.param_description if mechanism is not None else ""
    return f"; rows: {about}" if about else ""


def load_target_vae(cell_dir: Path, cell: CellConfig, dataset: Dataset) -> nn.Module:
    """The cell's trained target VAE (the dataset's model family, in its fast implementation),
    in eval mode; RuntimeError if the weights do not fit."""
    state = results.load_model_state(cell_dir)
    family = model_family(dataset.shape, dataset.num_classes)
    model = family.target_vae(latent_dim=cell.profile.latent_dim, per_example_gradients=False)
    model.load_state_dict(without_dp_lstm_aliases(state))  # DPLSTM-era files too
    return model.eval()


@dataclass(frozen=True)
class GridCell:
    """One cell's row in the grids: its mechanism, row label, model and the records it shows."""

    mech: str
    label: str
    model: nn.Module
    records: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # x, y, is_member
    train_index: np.ndarray  # the dataset rows of the cell's D_train: class-latent sampling


class NoAttackSet(ValueError):
    """A cell finished before the pipeline saved its attacked records (``attack_index.npz``)."""


def _rows(dataset: Dataset, index: np.ndarray) -> Pair:
    """The dataset's records at rows ``index`` as the cell saw them: series with fixed channel
    ranges are mapped to [-1, 1] record by record, as :func:`audit.cell.membership.cell_data`
    does."""
    scaler = dataset.channel_ranges
    x = dataset.x[index] if scaler is None else scaler.transform(dataset.x[index])
    return torch.from_numpy(x), torch.from_numpy(dataset.y[index])


def _cell_records(
    dataset: Dataset, attacked: AttackIndex, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Up to k members then k non-members of the cell's D_atk, unperturbed, classes in turn:
    (x, y, is_member)."""
    y = dataset.y[attacked.index]
    pick = np.concatenate(
        [
            _classes_in_turn(np.flatnonzero(m), y, k)
            for m in (attacked.is_member, ~attacked.is_member)
        ]
    )
    x, labels = _rows(dataset, attacked.index[pick])
    return x, labels, torch.from_numpy(attacked.is_member[pick])


def _classes_in_turn(idx: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The first k of ``idx`` ordered as: first of each class, then second of each class, ..."""
    labels = y[idx]
    rank = np.zeros(len(idx), dtype=int)
    for c in np.unique(labels):
        rank[labels == c] = np.arange(int((labels == c).sum()))
    return idx[np.lexsort((labels, rank))][:k]


def _grid_cell(cell_dir: Path, row: pd.Series, dataset: Dataset) -> GridCell:
    cell = load_cell_config(cell_dir)
    if (cell.dataset, cell.mech, cell.seed) != (row["dataset"], row["mech"], row["seed"]):
        raise ValueError(
            f"config.json says {cell.dataset}/{cell.mech}/seed {cell.seed}, "
            f"runs.csv says {row['dataset']}/{row['mech']}/seed {row['seed']}"
        )
    attacked = results.read_attack_index(cell_dir)
    if attacked is None:
        raise NoAttackSet(
            "no attack_index.npz (the cell finished before attacked records were saved); "
            "rerun it with --overwrite for its grid"
        )
    for index in (attacked.index, attacked.train_index):
        if len(index) and index.max() >= len(dataset.y):
            raise ValueError(
                f"attack_index.npz names row {index.max()} of a dataset of {len(dataset.y)} records"
            )
    label = (
        "non-private"
        if row["mech"] == BASELINE
        else (f"{row['param_label']}\n(ε={format_epsilon(row['epsilon'])})")
    )
    model = load_target_vae(cell_dir, cell, dataset)
    records = _cell_records(dataset, attacked, N_RECORDS)
    return GridCell(row["mech"], label, model, records, attacked.train_index)


def _load_grid_cells(
    run_dir: Path, rows: pd.DataFrame, dataset: Dataset, *, name: str, skipped: list[str]
) -> list[GridCell]:
    kind = GRID_KIND[dataset.modality]
    cells: list[GridCell] = []
    for _, row in rows.iterrows():
        cell_dir = results.cell_path(run_dir, row["config_hash"])
        try:
            grid_cell = _grid_cell(cell_dir, row, dataset)
        except CELL_ERRORS as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            skip(
                skipped,
                f"{name}: cell {row['config_hash']} left out of the {kind} grids: "
                f"{type(exc).__name__}: {reason}",
            )
            continue
        if cells and not all(
            torch.equal(a, b) for a, b in zip(cells[0].records, grid_cell.records, strict=True)
        ):
            skip(
                skipped,
                f"{name}: cell {row['config_hash']} attacks other records than the "
                f"first cell (different profile or window stride?); left out of the {kind} grids",
            )
            continue
        cells.append(grid_cell)
    return cells


def _kind(dataset_name: str) -> str:
    """'image' or 'series': what the grids of a dataset (known by name only) would show."""
    try:
        return GRID_KIND[dataset_modality(dataset_name)]
    except ValueError:  # a name this code does not know: say "image", as before series existed
        return GRID_KIND[Modality.IMAGE]


def _grid_dataset(
    run_dir: Path, hashes: list[str], *, name: str, data_home: Path | None, skipped: list[str]
) -> Dataset | None:
    """The dataset, cut as the first readable cell's options say (its window stride); None
    (skipped) where its content is not the data the cells were trained on (``data_sha256``)."""
    for h in hashes:
        try:
            cell = load_cell_config(results.cell_path(run_dir, h))
        except CELL_ERRORS:
            continue  # that cell is reported when its grid row is loaded
        try:
            dataset = load_dataset(
                cell.dataset, data_home=data_home, window_stride=cell.option("window_stride")
            )
        except (ValueError, OSError) as exc:
            skip(skipped, f"{name}: grids skipped, the dataset cannot be loaded: {exc}")
            return None
        if cell.option("data_sha256") not in (None, dataset.content_hash):
            skip(skipped, f"{name}: grids skipped, the data changed since the cells were run")
            return None
        return dataset
    skip(skipped, f"{name}: grids skipped, no cell has a readable config.json")
    return None


def grid_figures(
    run_dir: Path, rows: pd.DataFrame, *, name: str, data_home: Path | None, skipped: list[str]
) -> list[tuple[str, Figure]]:
    """Reconstructions of members and non-members, and generated samples, per mechanism and
    noise level, from the saved models of the lowest seed's ``rows`` (runs.csv rows of one
    dataset and profile, in report order: baseline first); images or series as the records are."""
    seed, frame_dataset = int(rows["seed"].min()), rows["dataset"].iloc[0]
    if _kind(str(frame_dataset)) == GRID_KIND[Modality.POINTS]:
        skip(
            skipped,
            f"{name}: no sample grids for points; the latent codes are plotted by "
            "benchmarks/pinwheel_figure.py",
        )
        return []
    rows = rows[rows["seed"] == seed].drop_duplicates("config_hash")
    rows = rows[[results.has_model(results.cell_path(run_dir, h)) for h in rows["config_hash"]]]
    if rows.empty:
        kind = _kind(str(frame_dataset))
        skip(
            skipped,
            f"{name}: no cell directory with model.pt for seed {seed}; {kind} grids skipped",
        )
        return []
    dataset = _grid_dataset(
        run_dir, list(rows["config_hash"]), name=name, data_home=data_home, skipped=skipped
    )
    cells = (
        []
        if dataset is None
        else _load_grid_cells(run_dir, rows, dataset, name=name, skipped=skipped)
    )
    if not cells:
        return []
    return [
        fig
        for mech, group in _grids_by_mech(cells).items()
        for fig in _mech_grids(mech, group, dataset, name=name, seed=seed)
    ]


def _mech_grids(
    mech: str, cells: list[GridCell], dataset: Dataset, *, name: str, seed: int
) -> list[tuple[str, Figure]]:
    """One mechanism's reconstruction grid and generated-samples grid (rows: noise levels)."""
    x, y, is_member = cells[0].records
    kinds = ["member" if m else "non-member" for m in is_member.tolist()]
    titles = [f"{kind} {kinds[: i + 1].count(kind)}" for i, kind in enumerate(kinds)]
    recon = [("original", x.numpy())] + [(c.label, _reconstruct(c.model, x, y)) for c in cells]
    if dataset.modality is Modality.IMAGE:
        classes = torch.arange(dataset.num_classes)
    else:  # class-latent sampling needs a D_train record of each class drawn
        classes = torch.unique(torch.from_numpy(dataset.y[cells[0].train_index]))
    labels = classes[torch.arange(max(2 * N_RECORDS, len(classes))) % len(classes)]  # all classes
    samples = [(c.label, _sample(c, labels, seed, dataset)) for c in cells]
    about = f"{name}: {mech}, seed {seed}"
    note = _noise_note(mech)
    draw = image_grid if dataset.modality is Modality.IMAGE else series_grid
    how = (
        "latent code ~ N(0, I) with the label"
        if dataset.modality is Modality.IMAGE
        else "latent code ~ q(·|x) of a real D_train record of the class"
    )
    return [
        (
            f"reconstructions_{mech}",
            draw(
                recon,
                column_titles=titles,
                title=f"{about}: reconstructions decode(μ) of members and non-members{note}",
            ),
        ),
        (
            f"samples_{mech}",
            draw(
                samples,
                column_titles=[dataset.class_names[i] for i in labels.tolist()],
                title=f"{about}: generated samples per noise level ({how}){note}",
            ),
        ),
    ]


def _grids_by_mech(cells: list[GridCell]) -> dict[str, list[GridCell]]:
    """Per private mechanism: the baseline's cells, then its own (or the baseline alone)."""
    base = [c for c in cells if c.mech == BASELINE]
    private = list(dict.fromkeys(c.mech for c in cells if c.mech != BASELINE))
    if not private:
        return {BASELINE: base}
    return {m: base + [c for c in cells if c.mech == m] for m in private}


def _reconstruct(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    with torch.inference_mode():
        mu, _ = model.encode(x, y)
        return model.decode(mu, y).numpy()


def _sample(cell: GridCell, labels: torch.Tensor, seed: int, dataset: Dataset) -> np.ndarray:
    """Decoded latents, the same draws for every model of the same latent size: z ~ N(0, I)
    (images), or class-specific z ~ q(z|x) of the cell's real D_train (series)."""
    if dataset.modality is Modality.SERIES:
        train = _rows(dataset, cell.train_index)
        x, _ = generate(cell.model, labels, seed=seed, method=Generation.CLASS_LATENT, source=train)
        return x.numpy()
    return generate(cell.model, labels, seed=seed, stream="report")[0].numpy()
