#!/usr/bin/env python
"""Issue 38 part 4, a study for one lent GPU: how much of a quick LFW20 cell's GPU time is kernel
launches, and what CUDA graphs and ``torch.compile`` take off it, before either is wired into a
cell. LFW20's quick shapes (64x64x3, 20 classes, latent 16), float32, random weights and records:

* decode: ``--decodes`` latents a call, no gradient (generation, the attacks' scoring), eager
  against the same call captured once as a CUDA graph (``torch.cuda.CUDAGraph``, static input
  and output buffers) and against ``torch.compile(mode="reduce-overhead")`` (Inductor's kernels
  replayed as CUDA graphs);
* train step: one non-private Adam step on a batch of ``--batch`` (the folded decoder, as
  ``train_vae`` runs it), eager against the whole step (forward, backward, ``Adam(capturable=
  True)``) captured as one CUDA graph;
* DP step: book-keeping DP-Adam's clipped sum on a batch of ``--batch``, eager only (its Poisson
  batches change shape every step, which a graph does not allow without padding): how far it is
  from its own kernels' time.

For each path: the median wall time of a call (``--repeats`` calls after ``--warmup``), the GPU
kernels' own time in a call by ``torch.profiler`` (the floor a launch-free path could reach), and
the largest difference from eager (a graph replays the same kernels: 0 expected; compiled code
fuses and may differ at rounding level). Ratios above 1 are faster than eager.

    python benchmarks/bench_cuda_graphs.py --device cuda [--decodes 256] [--batch 16]

On a machine without CUDA it stops with one line and exit status 2.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's code, not another

from timing import device_seconds  # noqa: E402

from models.dp import SampleLoss  # noqa: E402
from models.dp.book_keeping import BookKeepingGradients  # noqa: E402
from models.training import image_layout, vae_per_example_loss  # noqa: E402
from models.vae import ConditionalConvVAE, folded_training  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--decodes", type=int, default=256, help="latents a decode call (256)")
    p.add_argument("--batch", type=int, default=16, help="training batch (16, the quick one)")
    p.add_argument("--repeats", type=int, default=50, help="timed calls a path (50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first (5)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    return p.parse_args()


def timed(fn, device: torch.device, repeats: int, warmup: int) -> float:
    """Median wall seconds of one synchronised call (``timing.device_seconds``)."""
    for _ in range(warmup):
        fn()
    return statistics.median(device_seconds(fn, device) for _ in range(repeats))


def kernel_seconds(fn, device: torch.device, calls: int = 10) -> float:
    """GPU kernels' own time per call (torch.profiler's device time, summed over kernels)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize(device)
    total = sum(
        getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
        for e in prof.key_averages()
    )
    return total / 1e6 / calls


def graphed(fn, device: torch.device):
    """``fn`` (no arguments, returning a tensor) captured as a CUDA graph; a replay returns the
    graph's static output buffer."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm on a side stream, as capture requires
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


def main() -> int:
    args = parse_args()
    if not torch.cuda.is_available() or not str(args.device).startswith("cuda"):
        print(
            f"error: --device {args.device}: this study needs a CUDA GPU (none here)",
            file=sys.stderr,
        )
        return 2
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # IEEE float32, as the cells' DP training
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    vae = ConditionalConvVAE(channels=3, height=64, width=64, num_classes=20, latent_dim=16)
    vae = vae.to(device)
    z = torch.randn(args.decodes, 16, device=device)
    zy = torch.arange(args.decodes, device=device) % 20
    x = image_layout(torch.rand(args.batch, 3, 64, 64, device=device))
    y = torch.arange(args.batch, device=device) % 20
    noise = torch.randn(args.batch, 16, device=device)
    print(
        f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, LFW20 quick shapes, "
        f"{args.decodes} decodes, batch {args.batch}, median of {args.repeats} calls"
    )
    rows: list[tuple[str, str, float, float, float]] = []

    # decode
    vae.eval()

    def decode() -> torch.Tensor:
        with torch.no_grad():
            return vae.decode(z, zy)

    eager_out = decode().clone()
    rows.append(("decode", "eager", timed(decode, device, args.repeats, args.warmup),
                 kernel_seconds(decode, device), 0.0))  # fmt: skip
    replay = graphed(decode, device)
    diff = (replay() - eager_out).abs().max().item()
    rows.append(("decode", "cuda graph", timed(replay, device, args.repeats, args.warmup),
                 kernel_seconds(replay, device), diff))  # fmt: skip
    if not args.no_compile:
        compiled = torch.compile(vae.decode, mode="reduce-overhead", dynamic=False)

        def decode_compiled() -> torch.Tensor:
            with torch.no_grad():
                return compiled(z, zy)

        start = time.perf_counter()
        diff = (decode_compiled() - eager_out).abs().max().item()
        print(f"torch.compile of decode: {time.perf_counter() - start:.1f} s to compile")
        rows.append(("decode", "compile r-o", timed(decode_compiled, device, args.repeats,
                     args.warmup), kernel_seconds(decode_compiled, device), diff))  # fmt: skip

    # non-private train step
    model = copy.deepcopy(vae).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    state = copy.deepcopy(model.state_dict())

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=False)
        with folded_training(model):
            loss = vae_per_example_loss(model, x, y, noise, beta=1.0).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    for p in model.parameters():  # grads exist before capture, so zero_grad zeroes in place
        p.grad = torch.zeros_like(p)
    eager_step = timed(step, device, args.repeats, args.warmup)
    model.load_state_dict(state)  # in place: the parameters keep their addresses
    reference = step().item()  # the loss at ``state``, before this step's update
    rows.append(("train step", "eager", eager_step, kernel_seconds(step, device), 0.0))
    replay_step = graphed(step, device)  # the warm-up and capture take Adam steps too
    model.load_state_dict(state)
    diff = abs(replay_step().item() - reference)  # the same loss, by the captured kernels
    rows.append(("train step", "cuda graph", timed(replay_step, device, args.repeats,
                 args.warmup), kernel_seconds(replay_step, device), diff))  # fmt: skip

    # book-keeping DP step (eager)
    dp_model = copy.deepcopy(vae).train()
    engine = BookKeepingGradients(SampleLoss(dp_model, beta=1.0))

    def dp_step() -> torch.Tensor:
        return engine.clipped_sum(x, y, noise, clip_norm=1.0).norms

    rows.append(("DP step", "eager", timed(dp_step, device, args.repeats, args.warmup),
                 kernel_seconds(dp_step, device), 0.0))  # fmt: skip

    print(f"{'part':<11} {'path':<12} {'wall ms':>8} {'kernels ms':>11} {'launch share':>13} "
          f"{'x eager':>8}  max diff")  # fmt: skip
    eager = {part: wall for part, path, wall, _, _ in rows if path == "eager"}
    for part, path, wall, kernels, diff in rows:
        share = max(0.0, 1 - kernels / wall)
        print(f"{part:<11} {path:<12} {wall * 1e3:>8.3f} {kernels * 1e3:>11.3f} {share:>13.0%} "
              f"{eager[part] / wall:>8.2f}  {diff:.1e}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
