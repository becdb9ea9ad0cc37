"""Export one of the sweep's own cells as a release made outside the suite: its members,
non-members, reference records and D_gen as ``.npz`` files, and its trained VAE behind an entry
point, so that ``benchmark.py attack`` on them can be checked against the cell's own rows.

The exported sets are the cell's exactly (:func:`audit.cell.membership.attack_data`,
:func:`~audit.cell.membership.reference_records`), D_gen is drawn again from the saved model with
the cell's seed (prior generation: image cells), and the attack seed is the cell's seed, so the
release attack runs the same attacks on the same inputs with the same randomness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from attacks import Release
from attacks.threat import ReleaseKind
from audit import io
from audit.cell.attack_step import released_samples, unmet_attacks
from audit.cell.gen_accuracy import generation_labels
from audit.cell.membership import attack_data, cell_data, reference_records
from audit.datasets import dataset_split, load_dataset
from audit.mechanisms import get_mechanism
from audit.report.grids import load_target_vae
from audit.results import cell_path, load_cell_config
from models.factory import model_family
from models.generation import Generation, finite_records, generate

#: The entry-point module an export writes beside its files.
MODULE = "release_model.py"
RELEASE_FILE = "release.json"
ENTRY_POINTS = '''"""Entry points of a release exported from a sweep cell (audit.release.export)."""

from pathlib import Path

from audit.release.export import exported_model

HERE = Path(__file__).resolve().parent


def vae():
    return exported_model(HERE)


def decoder():
    return exported_model(HERE)
'''


@dataclass(frozen=True)
class ExportedRelease:
    """Where an export went and how to attack it (``argv``: ``benchmark.py attack``'s)."""

    out: Path
    kind: ReleaseKind
    argv: tuple[str, ...]


def export_cell(
    run_dir: Path, config_hash: str, out: Path, *, data_home: Path | None = None
) -> ExportedRelease:
    """Write cell ``config_hash`` of ``run_dir`` as a release into ``out``."""
    cell_dir = cell_path(Path(run_dir), config_hash)
    cell = load_cell_config(cell_dir)
    dataset = load_dataset(
        cell.dataset, data_home=data_home, window_stride=cell.option("window_stride")
    )
    family = model_family(dataset.shape, dataset.num_classes)
    if family.generation is not Generation.PRIOR:
        raise ValueError(
            f"cell {config_hash} draws D_gen from its training records ({family.generation.value}"
            "); only cells that draw it from the prior (images) are exported"
        )
    split = dataset_split(dataset, cell.seed)
    data = cell_data(dataset, split, cell)
    atk = attack_data(data, cell)
    reference = reference_records(data, cell)
    model = family.for_inference(load_target_vae(cell_dir, cell, dataset)).eval()
    labels = generation_labels(cell, data)
    gen_x, gen_y = generate(model, labels, seed=cell.seed, method=family.generation)
    gen_x, _ = finite_records(gen_x)
    out = io.check_writable_dir(Path(out))
    m = atk.is_member
    sets = {
        "members": (atk.x[m], atk.y[m]),
        "non-members": (atk.x[~m], atk.y[~m]),
        "samples": (gen_x, gen_y),
    }
    if reference is not None:
        sets["reference"] = (reference.x, reference.y)
    for name, (x, y) in sets.items():
        io.save_npz(out / f"{name}.npz", {"X": x.numpy(), "y": y.numpy()})
    io.save_state(out / "model.pt", {"model": model.state_dict()})
    kind = get_mechanism(cell.mech).release
    release = Release.of_kind(
        kind, model=model, samples=released_samples(gen_x, gen_y), reference=reference
    )
    ran = tuple(n for n in cell.attacks if n not in unmet_attacks(cell, release))
    meta = {
        "cell": config_hash,
        "record_shape": list(dataset.shape),
        "num_classes": dataset.num_classes,
        "latent_dim": cell.profile.latent_dim,
        "kind": kind.value,
    }
    io.write_json(out / RELEASE_FILE, meta)
    io.write_text(out / MODULE, ENTRY_POINTS)
    return ExportedRelease(out, kind, tuple(_argv(out, cell, kind, ran, reference is not None)))


def _argv(
    out: Path,
    cell,
    kind: ReleaseKind,
    ran: tuple[str, ...],
    has_reference: bool,  # noqa: ANN001
) -> list[str]:
    argv = ["attack", "--members", str(out / "members.npz")]
    argv += ["--non-members", str(out / "non-members.npz")]
    if has_reference:
        argv += ["--reference", str(out / "reference.npz")]
    argv += ["--samples", str(out / "samples.npz")]
    if kind is ReleaseKind.WHOLE_VAE:
        argv += ["--vae", f"{out / MODULE}:vae"]
    elif kind is ReleaseKind.DECODER_ONLY:
        argv += ["--decoder", f"{out / MODULE}:decoder"]
    argv += ["--attack", *ran, "--attack-samples", str(cell.profile.attack_samples)]
    return [*argv, "--seed", str(cell.seed), "--name", cell.dataset]


def exported_model(directory: Path) -> nn.Module:
    """The VAE of an export (``release.json`` and ``model.pt`` in ``directory``), in the
    suite's own protocol (conditional: labels are class indices)."""
    meta = json.loads((Path(directory) / RELEASE_FILE).read_text())
    family = model_family(tuple(meta["record_shape"]), meta["num_classes"])
    model = family.target_vae(latent_dim=meta["latent_dim"], per_example_gradients=False)
    state = io.load_state(Path(directory) / "model.pt")["model"]
    model.load_state_dict(state)
    return family.for_inference(model).eval()
