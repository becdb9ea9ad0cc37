"""Does LFW20's D_gen carry identity? (issue 27)

Trains LFW20's non-private target VAE (the quick profile's 200 balanced D_train records, seed 0,
batch 16) under each variant given, then measures:

- ``label_var_ratio``: for 10 fixed latents decoded with each of the 20 labels, the pixel
  variance across labels over the variance across latents (0: the decoder ignores the label,
  so D_gen's labels say nothing about the faces);
- ``acc_face_embedding``: the face-embedding classifier (dlib's descriptor and a logistic
  regression, :mod:`models.face_embedding`) trained on 1000 generated faces (labels in D_val's
  shares; regularisation chosen on a held-out fifth of them), accuracy on real D_test;
- the same classifier trained on the 200 real D_train faces (the ceiling), and the majority rate.

Usage (one thread; about 6 minutes a 120-epoch variant on this 2-core machine):

    python benchmarks/probe_lfw_generation.py --data-home DIR \\
        --variants '[{"epochs": 40}, {"epochs": 120}, {"epochs": 240}]'

A variant may set ``epochs``, ``beta``, ``latent`` (latent size) and ``lr``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.cell.membership import balanced_subset  # noqa: E402
from audit.datasets import dataset_split, load_dataset  # noqa: E402
from dpvae_core.seeding import Purpose, numpy_rng  # noqa: E402
from models.face_embedding import embedding_accuracy  # noqa: E402
from models.factory import model_family  # noqa: E402
from models.generation import gen_labels, generate  # noqa: E402
from models.training import VAETrainSettings, train_vae  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-home", type=Path, required=True)
    parser.add_argument("--variants", default='[{"epochs": 120}]', help="JSON list of variants")
    parser.add_argument("--gen-records", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    variants = json.loads(args.variants)
    torch.set_num_threads(1)

    ds = load_dataset("lfw20", data_home=args.data_home)
    sp = dataset_split(ds, args.seed)
    rng = numpy_rng(args.seed, Purpose.SPLIT, "cap")
    tr = balanced_subset(sp.train, ds.y[sp.train], 200, rng)

    def pair(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(ds.x[idx]), torch.from_numpy(ds.y[idx])

    train, val, test = pair(tr), pair(sp.val), pair(sp.test)
    majority = np.bincount(test[1].numpy()).max() / len(test[1])
    t0 = time.time()
    real = embedding_accuracy(train, val, test)
    print(
        f"face-embedding on the 200 real D_train faces: {real:.3f} on real D_test; "
        f"majority rate {majority:.3f}; {time.time() - t0:.0f} s",
        flush=True,
    )
    family = model_family(train[0].shape[1:], ds.num_classes)
    for v in variants:
        t0 = time.time()
        torch.manual_seed(args.seed)
        vae = family.target_vae(latent_dim=v.get("latent", 16), per_example_gradients=False)
        settings = VAETrainSettings(
            epochs=v["epochs"], batch_size=16, lr=v.get("lr", 1e-3), beta=v.get("beta", 1.0),
            seed=args.seed,
        )  # fmt: skip
        train_vae(vae, train, val, settings)
        train_s = time.time() - t0
        vae.eval()
        z = torch.randn(10, vae.latent_dim, generator=torch.Generator().manual_seed(args.seed))
        with torch.inference_mode():
            faces = torch.stack(
                [vae.decode(z, torch.full((10,), c)) for c in range(ds.num_classes)]
            )
        ratio = faces.var(0).mean().item() / faces.var(1).mean().item()
        labels = gen_labels(val[1], args.gen_records, seed=args.seed)
        gx, gy = generate(vae, labels, seed=args.seed)
        fit = torch.arange(len(gy)) % 5 != 0
        t1 = time.time()
        acc = embedding_accuracy((gx[fit], gy[fit]), (gx[~fit], gy[~fit]), test)
        print(
            json.dumps(
                {
                    **v,
                    "train_s": round(train_s),
                    "label_var_ratio": round(ratio, 3),
                    "acc_face_embedding": round(acc, 3),
                    "classifier_s": round(time.time() - t1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
