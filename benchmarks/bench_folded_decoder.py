#!/usr/bin/env python
"""The conv VAE's decoder with each nearest 2x upsample and 3x3 conv folded into one transposed
convolution (``models.vae.folded_decoder``) against the modules, on LFW20's quick shapes
(64x64x3, 20 classes, latent 16), the two taking turns in every repeat (medians, process CPU
seconds; ``benchmarks/timing.py``), in float32 and in bf16 autocast:

* decode: ``--decodes`` latents at once, no gradient (generation, the attacks' scoring);
* train step: one non-private Adam step on a batch of ``--batch`` (``models.vae.folded_training``
  against training mode's modules);
* DP step: book-keeping DP-Adam's clipped sum on a batch of ``--batch`` (its forward folded
  against its hooks on the modules), float32 and bf16 as a cell runs it.

Prints each ratio (modules / folded: above 1 the fold is faster) and the largest difference
between the two paths' outputs, which differ only in the order of float sums.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_folded_decoder.py --threads 1
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's code, not another

from timing import median_times  # noqa: E402

from dpvae_core.precision import mixed_precision  # noqa: E402
from models.dp import SampleLoss  # noqa: E402
from models.dp.book_keeping import BookKeepingGradients  # noqa: E402
from models.training import channels_last_model, image_layout  # noqa: E402
from models.vae import ConditionalConvVAE, folded_training, vae_loss_terms  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--decodes", type=int, default=400, help="latents decoded at once (400)")
    p.add_argument("--batch", type=int, default=16, help="training batch (16, the quick one)")
    p.add_argument("--steps", type=int, default=5, help="steps per timed repeat (5)")
    p.add_argument("--repeats", type=int, default=5, help="repeats, paths taking turns (5)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vae = ConditionalConvVAE(channels=3, height=64, width=64, num_classes=20, latent_dim=16)
    vae = channels_last_model(vae)
    z, zy = torch.randn(args.decodes, 16), torch.arange(args.decodes) % 20
    x = image_layout(torch.rand(args.batch, 3, 64, 64))
    y, noise = torch.arange(args.batch) % 20, torch.randn(args.batch, 16)
    print(
        f"LFW20 quick shapes, {args.decodes} decodes, batch {args.batch}, {args.steps} steps a "
        f"repeat, median of {args.repeats}, {args.threads} thread(s), torch {torch.__version__}"
    )
    print(f"{'part':<12} {'precision':<9} {'modules s':>10} {'folded s':>9} {'ratio':>6}  max diff")
    for precision in ("float32", "bf16"):
        for part, (modules, folded) in paths(vae, z, zy, x, y, noise, args, precision).items():
            times = median_times({"modules": modules, "folded": folded}, args.repeats)
            a, b = times["modules"][1], times["folded"][1]
            diff = (modules() - folded()).abs().max().item()
            print(f"{part:<12} {precision:<9} {a:>10.3f} {b:>9.3f} {a / b:>6.2f}  {diff:.1e}")


def paths(vae, z, zy, x, y, noise, args, precision):  # noqa: ANN001, ANN201
    """{part: (modules, folded)}, each a call returning a tensor to compare."""

    def decode(fold: bool):  # noqa: ANN202
        def run() -> torch.Tensor:
            vae.train(not fold)  # evaluation mode folds, training mode runs the modules
            with torch.no_grad(), mixed_precision("cpu", precision):
                return vae.decode(z, zy)

        return run

    def train(fold: bool):  # noqa: ANN202
        model = copy.deepcopy(vae).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def run() -> torch.Tensor:
            state = copy.deepcopy(model.state_dict())  # every repeat from the same weights
            with mixed_precision("cpu", precision):
                for _ in range(args.steps):
                    with folded_training(model) if fold else torch.enable_grad():
                        recon, mu, logvar, _ = model(x, y, noise)
                    rec, kl = vae_loss_terms(x, recon, mu, logvar)
                    opt.zero_grad(set_to_none=True)
                    (rec + kl).mean().backward()
                    opt.step()
            out = torch.cat([p.detach().flatten() for p in model.parameters()])
            model.load_state_dict(state)
            return out

        return run

    def dp(fold: bool):  # noqa: ANN202
        model = copy.deepcopy(vae).train()
        engine = BookKeepingGradients(SampleLoss(model, beta=1.0), precision=precision)
        if not fold:
            engine._folding = []  # the hooks on the modules, as before the fold

        def run() -> torch.Tensor:
            for _ in range(args.steps):
                got = engine.clipped_sum(x, y, noise, clip_norm=1.0)
            return torch.cat([g.flatten() for g in got.grads])

        return run

    return {
        "decode": (decode(False), decode(True)),
        "train step": (train(False), train(True)),
        "DP step": (dp(False), dp(True)),
    }


if __name__ == "__main__":
    main()
