"""The face-embedding target classifier: dlib's pretrained face descriptor, frozen, and a
multinomial logistic regression on its 128-d codes (issue 27).

Why: a classifier trained from scratch on 200 LFW20 faces (10 per person) reaches 0.33-0.57 on
real D_test, so it cannot tell whether generated faces carry identity. dlib's ResNet face
descriptor (Davis King's ``dlib_face_recognition_resnet_model_v1``, public domain) installs offline
from the package registry (``pip install -e '.[faces]'``: ``dlib-bin`` and
``face-recognition-models``); its author states it was trained on about 3 million faces of 7485
identities with LFW's identities left out, so it has not seen LFW20's people. A logistic
regression on its codes of LFW20's 200 real D_train faces scored 0.95 on real D_test (seed 0,
docs/lfw20-faces.md). The descriptor is public and fixed, so it changes no privacy claim: only
the regression reads the records it is trained on (D_gen, or D_train for ``acc_real``).

The descriptor wants 150x150 aligned face chips; LFW's 64x64 crops (scikit-learn's centred
slice) are resized bilinearly to 150x150, which the descriptor accepts as a chip.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

#: The classifier kind a profile names (``Profile.classifier``).
FACE_EMBEDDING = "face-embedding"
#: The descriptor's input side (pixels) and output size.
CHIP_SIDE = 150
EMBEDDING_DIM = 128
#: Inverse regularisation strengths tried; the one with the best accuracy on the validation
#: records (held-out D_gen, or D_val for the real baseline; never D_test) is refitted.
C_GRID = (0.1, 1.0, 10.0)
#: Faces per call to the descriptor.
BATCH = 64
#: Embeddings of real record sets kept in memory (D_train, D_val and D_test repeat across the
#: cells of a seed): at most this many sets, keyed by their content digest.
CACHE_SETS = 8

INSTALL_HINT = (
    "the face-embedding classifier needs dlib's face descriptor: "
    "pip install -e '.[faces]' (dlib-bin and face-recognition-models, offline from the registry)"
)


def available() -> bool:
    """Whether dlib and the descriptor's weights are installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("dlib", "face_recognition_models"))


def require() -> None:
    """Raise ``RuntimeError`` (:data:`INSTALL_HINT`) where the extra is missing."""
    if not available():
        raise RuntimeError(INSTALL_HINT)


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
    """dlib's face descriptor on (N, 3, H, W) images in [0, 1]; codes are (N, 128) float64."""

    def __init__(self) -> None:
        require()
        import dlib

        self._rec = dlib.face_recognition_model_v1(str(_weights()))
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, x: torch.Tensor, *, cache: bool = False) -> np.ndarray:
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"face descriptor needs (N, 3, H, W) RGB images, got {tuple(x.shape)}")
        key = hashlib.sha256(x.float().contiguous().numpy().tobytes()).hexdigest() if cache else ""
        if key and key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        codes = np.empty((len(x), EMBEDDING_DIM))
        for start in range(0, len(x), BATCH):
            chips = _chips(x[start : start + BATCH])
            codes[start : start + len(chips)] = np.array(self._rec.compute_face_descriptor(chips))
        if key:
            self._cache[key] = codes
            while len(self._cache) > CACHE_SETS:
                self._cache.popitem(last=False)
        return codes


def _chips(x: torch.Tensor) -> list[np.ndarray]:
    """(N, 3, H, W) in [0, 1] to N contiguous 150x150x3 uint8 arrays."""
    side = (CHIP_SIDE, CHIP_SIDE)
    big = F.interpolate(x.float(), size=side, mode="bilinear", align_corners=False)
    arr = (big.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return [np.ascontiguousarray(a) for a in arr]


_DESCRIPTOR: FaceDescriptor | None = None


def descriptor() -> FaceDescriptor:
    """The process's one descriptor (its real-set cache is shared by the cells it runs)."""
    global _DESCRIPTOR
    if _DESCRIPTOR is None:
        _DESCRIPTOR = FaceDescriptor()
    return _DESCRIPTOR


def embedding_accuracy(
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
) -> float:
    """Accuracy on ``test`` of a logistic regression on the face codes of ``train``, its
    regularisation chosen on ``val`` (:data:`C_GRID`; ties go to the stronger one), the chosen
    fit scored on ``test``.

    Codes are cached by content (D_train, D_val and D_test repeat across a seed's cells).
    Deterministic (lbfgs, no random state)."""
    from sklearn.linear_model import LogisticRegression

    embed = descriptor()
    x_tr, x_va, x_te = (embed(p[0], cache=True) for p in (train, val, test))
    y_tr, y_va, y_te = (p[1].numpy() for p in (train, val, test))
    if len(np.unique(y_tr)) < 2:
        return float(np.mean(y_te == y_tr[0]))

    fitted = {c: LogisticRegression(C=c, max_iter=2000).fit(x_tr, y_tr) for c in C_GRID}
    best = max(C_GRID, key=lambda c: (fitted[c].score(x_va, y_va), -c))
    return float(fitted[best].score(x_te, y_te))
