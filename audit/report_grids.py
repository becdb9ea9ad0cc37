"""The report's reconstruction and generated-sample grids (paper 003, Figure 6), from the saved
models ``cells/<hash>/{config.json, model.pt}`` of one seed.

Images are drawn as image grids (:func:`audit.plots.image_grid`), sensor series as line plots
(:func:`audit.plots.series_grid`: one panel per record, one line per channel). Rows are the
noise levels of one mechanism under the non-private baseline; columns are attacked members and
non-members (unperturbed D_atk records of the cell, classes in turn) or generated samples per
class. Generation follows the model family (:mod:`models.factory`): images decode z ~ N(0, I)
with the label; series decode z ~ q(z|x) of a real D_train record of the class (the pipeline's
class-specific sampling; under ldp and vae-ldp the pipeline drew from the perturbed records,
which the report does not recompute). A cell whose inputs are missing or do not fit is left out
with a note in ``skipped``.
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

from audit import io
from audit.config import CellConfig, MechanismName
from audit.datasets import Dataset, dataset_modality, load_dataset, stratified_split
from audit.mechanisms import cell_from_canonical
from audit.pipeline import attack_set, cell_data, generate
from audit.plots import image_grid, series_grid
from audit.results import CELLS_DIR
from audit.stats import format_epsilon
from core.records import Modality
from core.seeding import Purpose, torch_generator
from models.factory import Generation, model_family
from models.lstm_vae import without_dp_lstm_aliases
from models.training import Pair

log = logging.getLogger(__name__)

N_RECORDS = 4  # members and non-members per reconstruction grid
#: What a row label's symbol means, so that z (the DP noise multiplier) is not read as the latent.
NOISE_NOTE = {
    "cdp": "rows: DP-Adam noise multiplier z",
    "cdp-termwise": "rows: DP-Adam noise multiplier z",
    "ldp": "rows: pixelization εᵢ",
    "vae-ldp": "rows: perturbation noise bound σ",
}
#: What a stale, foreign or damaged cell raises while it is loaded for the grids.
CELL_ERRORS = (ValueError, KeyError, TypeError, OSError, RuntimeError, pickle.UnpicklingError)
NONE = MechanismName.NONE.value
GRID_KIND = {Modality.IMAGE: "image", Modality.SERIES: "series"}


def _skip(skipped: list[str], message: str) -> None:
    log.warning("%s", message)
    skipped.append(message)


def load_cell_config(cell_dir: Path) -> CellConfig:
    """The CellConfig a cell directory was run with; its hash must name the directory."""
    data = io.read_json(Path(cell_dir) / "config.json")
    c = data["config"]
    cell = cell_from_canonical(c)
    if cell.config_hash != data["hash"] or Path(cell_dir).name != data["hash"]:
        raise ValueError(
            f"config.json of {cell_dir} hashes to {cell.config_hash}, not to its "
            f"recorded hash {data['hash']} and directory name"
        )
    return cell


def load_model(cell_dir: Path, cell: CellConfig, dataset: Dataset) -> nn.Module:
    """The cell's trained target VAE (the dataset's model family, in its fast implementation),
    in eval mode; RuntimeError if the weights do not fit."""
    state = io.load_state(Path(cell_dir) / "model.pt")
    if state.get("schema_version") != io.SCHEMA_VERSION:
        raise ValueError(
            f"model.pt schema_version {state.get('schema_version')!r}, this code "
            f"reads {io.SCHEMA_VERSION}"
        )
    family = model_family(dataset.shape, dataset.num_classes)
    model = family.target_vae(latent_dim=cell.profile.latent_dim, per_example_gradients=False)
    model.load_state_dict(without_dp_lstm_aliases(state["model"]))  # DPLSTM-era files too
    return model.eval()


@dataclass(frozen=True)
class GridCell:
    """One cell's row in the grids: its mechanism, row label, model and the records it shows."""

    mech: str
    label: str
    model: nn.Module
    records: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # x, y, is_member
    train: Pair  # the cell's real (unperturbed, scaled) D_train: class-latent sampling


def _cell_records(
    dataset: Dataset, cell: CellConfig, k: int
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], Pair]:
    """(up to k members then k non-members of the cell's D_atk, unperturbed, classes in turn:
    x, y, is_member), and the cell's real D_train."""
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=cell.seed)
    data = cell_data(dataset, split, cell)
    atk = attack_set(data, cell)
    y = atk.y.numpy()
    idx = np.concatenate(
        [_classes_in_turn(np.flatnonzero(m), y, k) for m in (atk.is_member, ~atk.is_member)]
    )
    return (atk.x[idx], atk.y[idx], torch.from_numpy(atk.is_member[idx])), data.train


def _classes_in_turn(idx: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The first k of ``idx`` ordered as: first of each class, then second of each class, ..."""
    labels = y[idx]
    rank = np.zeros(len(idx), dtype=int)
    for c in np.unique(labels):
        rank[labels == c] = np.arange(int((labels == c).sum()))
    return idx[np.lexsort((labels, rank))][:k]


def _grid_cell(cell_dir: Path, row: pd.Series, dataset: Dataset) -> GridCell:
    cell = load_cell_config(cell_dir)
    if (cell.dataset, cell.mech.value, cell.seed) != (row["dataset"], row["mech"], row["seed"]):
        raise ValueError(
            f"config.json says {cell.dataset}/{cell.mech.value}/seed {cell.seed}, "
            f"runs.csv says {row['dataset']}/{row['mech']}/seed {row['seed']}"
        )
    label = (
        "non-private"
        if row["mech"] == NONE
        else (f"{row['param_label']}\n(ε={format_epsilon(row['epsilon'])})")
    )
    records, train = _cell_records(dataset, cell, N_RECORDS)
    return GridCell(row["mech"], label, load_model(cell_dir, cell, dataset), records, train)


def _load_grid_cells(
    run_dir: Path, rows: pd.DataFrame, dataset: Dataset, *, name: str, skipped: list[str]
) -> list[GridCell]:
    kind = GRID_KIND[dataset.modality]
    cells: list[GridCell] = []
    for _, row in rows.iterrows():
        cell_dir = Path(run_dir) / CELLS_DIR / row["config_hash"]
        try:
            grid_cell = _grid_cell(cell_dir, row, dataset)
        except CELL_ERRORS as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            _skip(
                skipped,
                f"{name}: cell {row['config_hash']} left out of the {kind} grids: "
                f"{type(exc).__name__}: {reason}",
            )
            continue
        if cells and not all(
            torch.equal(a, b) for a, b in zip(cells[0].records, grid_cell.records, strict=True)
        ):
            _skip(
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
            cell = load_cell_config(Path(run_dir) / CELLS_DIR / h)
        except CELL_ERRORS:
            continue  # that cell is reported when its grid row is loaded
        try:
            dataset = load_dataset(
                cell.dataset, data_home=data_home, window_stride=cell.option("window_stride")
            )
        except (ValueError, OSError) as exc:
            _skip(skipped, f"{name}: grids skipped, the dataset cannot be loaded: {exc}")
            return None
        if cell.option("data_sha256") not in (None, dataset.content_hash):
            _skip(skipped, f"{name}: grids skipped, the data changed since the cells were run")
            return None
        return dataset
    _skip(skipped, f"{name}: grids skipped, no cell has a readable config.json")
    return None


def grid_figures(
    run_dir: Path, rows: pd.DataFrame, *, name: str, data_home: Path | None, skipped: list[str]
) -> list[tuple[str, Figure]]:
    """Reconstructions of members and non-members, and generated samples, per mechanism and
    noise level, from the saved models of the lowest seed's ``rows`` (runs.csv rows of one
    dataset and profile, in report order: baseline first); images or series as the records are."""
    seed, frame_dataset = int(rows["seed"].min()), rows["dataset"].iloc[0]
    rows = rows[rows["seed"] == seed].drop_duplicates("config_hash")
    rows = rows[
        [(Path(run_dir) / CELLS_DIR / h / "model.pt").is_file() for h in rows["config_hash"]]
    ]
    if rows.empty:
        kind = _kind(str(frame_dataset))
        _skip(
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
        classes = torch.unique(cells[0].train[1])
    labels = classes[torch.arange(max(2 * N_RECORDS, len(classes))) % len(classes)]  # all classes
    samples = [(c.label, _sample(c, labels, seed, dataset.modality)) for c in cells]
    about = f"{name}: {mech}, seed {seed}"
    note = f"; {NOISE_NOTE[mech]}" if mech in NOISE_NOTE else ""
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
    base = [c for c in cells if c.mech == NONE]
    private = list(dict.fromkeys(c.mech for c in cells if c.mech != NONE))
    if not private:
        return {NONE: base}
    return {m: base + [c for c in cells if c.mech == m] for m in private}


def _reconstruct(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    with torch.inference_mode():
        mu, _ = model.encode(x, y)
        return model.decode(mu, y).numpy()


def _sample(cell: GridCell, labels: torch.Tensor, seed: int, modality: Modality) -> np.ndarray:
    """Decoded latents, the same draws for every model of the same latent size: z ~ N(0, I)
    (images), or class-specific z ~ q(z|x) of the cell's real D_train (series)."""
    if modality is Modality.SERIES:
        x, _ = generate(
            cell.model, labels, seed=seed, method=Generation.CLASS_LATENT, source=cell.train
        )
        return x.numpy()
    gen = torch_generator(seed, Purpose.GENERATE, "report")
    z = torch.randn(len(labels), cell.model.latent_dim, generator=gen)
    with torch.inference_mode():
        return cell.model.decode(z, labels).numpy()
