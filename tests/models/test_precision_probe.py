"""``--device auto`` and ``--precision auto``: what each resolves to on which machine (CUDA and the
CPU's bf16 mocked), the timing probe's decision on a mocked clock, and the probe's workload."""

from __future__ import annotations

import pytest
import torch

import dpvae_core.precision as precision
import dpvae_core.validation as validation
from dpvae_core.precision import (
    BF16_MIN_SPEEDUP,
    Precision,
    PrecisionChoice,
    bf16_speedup,
    resolve_precision,
)
from dpvae_core.validation import DeviceChoice, resolve_device
from models.precision_probe import vae_step_probe
from models.vae import ConditionalConvVAE


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_device_is_the_gpu_where_there_is_one(no_gpu, monkeypatch):
    assert resolve_device("auto") == DeviceChoice("cpu", "auto: no CUDA GPU")
    assert resolve_device("auto").line() == "device: cpu (auto: no CUDA GPU)"
    assert resolve_device("cpu") == DeviceChoice("cpu", "--device cpu")
    with pytest.raises(ValueError, match="--device cuda: CUDA is not available here"):
        resolve_device("cuda")
    for bad in ("bogus", "AUTO", "auto:0", "gpu"):
        with pytest.raises(ValueError, match="choose auto, cpu, cuda or cuda:N"):
            resolve_device(bad)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Fake H200")
    chosen = resolve_device("auto")
    assert chosen.device == "cuda" and "Fake H200" in chosen.reason
    assert resolve_device("cuda:1") == DeviceChoice("cuda:1", "--device cuda:1")
    with pytest.raises(ValueError, match="has 2 CUDA device"):
        resolve_device("cuda:2")


def test_the_sweep_config_takes_auto_but_no_other_unknown_device():
    assert validation.check_device_name("auto", auto=True) == "auto"
    with pytest.raises(ValueError, match=r"unknown device 'auto'; choose cpu, cuda or cuda:N"):
        validation.check_device_name("auto")
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; choose auto, cpu"):
        validation.check_device_name("tpu", auto=True)


def test_auto_precision_on_a_cpu_follows_its_native_bf16(monkeypatch):
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: True)
    chosen = resolve_precision("auto", "cpu")
    assert chosen.precision is Precision.BF16 and chosen.speedup is None
    assert chosen.line() == "precision: bf16 (auto: this CPU computes bf16 natively)"
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: False)
    chosen = resolve_precision("auto", "cpu")
    assert chosen.precision is Precision.FLOAT32 and "no native bf16" in chosen.reason
    # explicit values keep their checks, and say they were given
    assert resolve_precision("float32", "cpu") == PrecisionChoice(
        Precision.FLOAT32, "--precision float32"
    )
    with pytest.raises(ValueError, match="this CPU has no native bf16"):
        resolve_precision("bf16", "cpu")
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ValueError, match="unknown precision 'AUTO'"):
        resolve_precision("AUTO", "cpu")


def _never() -> float:
    raise AssertionError("the probe ran where it must not")


def test_auto_precision_on_a_gpu_is_bf16_only_where_the_probe_measures_it_faster(monkeypatch):
    monkeypatch.setattr(precision, "cuda_bf16", lambda: True)
    monkeypatch.setattr(precision, "native_bf16_cpu", _never)  # a GPU's choice never asks
    slower = resolve_precision("auto", "cuda", probe=lambda: 0.88)  # the H200's measurement
    assert slower.precision is Precision.FLOAT32 and slower.speedup == 0.88
    assert "0.88x" in slower.line() and "below the 1.10x" in slower.line()
    faster = resolve_precision("auto", "cuda:0", probe=lambda: 1.5)
    assert faster.precision is Precision.BF16 and "1.50x" in faster.reason
    at = resolve_precision("auto", "cuda", probe=lambda: BF16_MIN_SPEEDUP)
    assert at.precision is Precision.BF16  # the threshold itself is enough
    just_below = resolve_precision("auto", "cuda", probe=lambda: BF16_MIN_SPEEDUP - 1e-9)
    assert just_below.precision is Precision.FLOAT32
    assert resolve_precision("auto", "cuda").precision is Precision.FLOAT32  # not measured
    monkeypatch.setattr(precision, "cuda_bf16", lambda: False)
    old = resolve_precision("auto", "cuda", probe=_never)
    assert old.precision is Precision.FLOAT32 and "no bf16" in old.reason
    assert resolve_precision("bf16", "cuda", probe=_never).reason == "--precision bf16"


class FakeClock:
    """A timer that ``run(precision)`` advances by a scripted number of seconds per call."""

    def __init__(self, seconds: dict[Precision, list[float]]) -> None:
        self.now = 0.0
        self.seconds = {p: list(s) for p, s in seconds.items()}
        self.calls: list[Precision] = []

    def __call__(self) -> float:
        return self.now

    def run(self, p: Precision) -> None:
        self.calls.append(p)
        self.now += self.seconds[p].pop(0)


def test_the_probe_takes_turns_and_compares_medians():
    f, b = Precision.FLOAT32, Precision.BF16
    # warm-ups first (their times never count: 100 s each), then 5 rounds; one bf16 outlier
    clock = FakeClock({f: [100, 1, 1, 1, 1, 1], b: [100, 0.5, 0.5, 9.0, 0.5, 0.5]})
    assert bf16_speedup(clock.run, rounds=5, timer=clock) == 2.0
    assert clock.calls == [f, b, f, b, b, f, f, b, b, f, f, b]  # the starter alternates
    # the H200's case: bf16 slower, so auto keeps float32 on a mocked GPU
    clock = FakeClock({f: [1.0] * 4, b: [1.0, 1.25, 1.25, 1.25]})
    ratio = bf16_speedup(clock.run, rounds=3, timer=clock)
    assert ratio == pytest.approx(0.8)


def test_the_probe_decides_a_gpus_precision_on_a_mocked_clock(monkeypatch):
    monkeypatch.setattr(precision, "cuda_bf16", lambda: True)
    f, b = Precision.FLOAT32, Precision.BF16
    for bf16_seconds, expected in ((0.5, b), (0.95, f), (1.2, f)):
        clock = FakeClock({f: [1.0] * 6, b: [bf16_seconds] * 6})
        chosen = resolve_precision(
            "auto", "cuda", probe=lambda c=clock: bf16_speedup(c.run, timer=c)
        )
        assert chosen.precision is expected, (bf16_seconds, chosen)
        assert chosen.speedup == pytest.approx(1.0 / bf16_seconds)


def test_the_probe_trains_one_initial_vae_per_precision_and_leaves_the_global_generator():
    def make():
        return ConditionalConvVAE(channels=1, height=8, width=8, num_classes=3, latent_dim=2)

    state = torch.get_rng_state()
    probe = vae_step_probe(make, (1, 8, 8), 3, batch_size=4, lr=1e-2, beta=1.0, device="cpu")
    assert torch.equal(torch.get_rng_state(), state)  # building it draws nothing of the sweep's
    assert probe.data[0].shape == (12, 1, 8, 8) and probe.data[1].tolist() == [0, 1, 2] * 4
    before = {p: _flat(m) for p, m in probe.models.items()}
    assert torch.equal(before[Precision.FLOAT32], before[Precision.BF16])  # one initial VAE
    for trained, other in ((Precision.FLOAT32, Precision.BF16), (Precision.BF16, None)):
        probe(trained)
        assert not torch.equal(_flat(probe.models[trained]), before[trained])  # Adam stepped
        if other is not None:
            assert torch.equal(_flat(probe.models[other]), before[other])  # its own copy


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])
