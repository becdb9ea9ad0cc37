"""The file format of dlib's face-recognition network: the architecture that
``dlib_face_recognition_resnet_model_v1.dat`` must hold, and the parser that reads it (no dlib
import).

:func:`architecture` lists the layer types of ``anet_type`` (the network :mod:`models.dlib_resnet`
runs) from the input to the output. :func:`parse` reads the ``.dat`` file's bytes: dlib's
serialisation (``dlib/serialize.h``: integers as a control byte holding the byte count and sign
then the bytes, little-endian; floats as a mantissa and an exponent integer; strings as a length
and the bytes; bools as ``'1'``/``'0'``; ``resizable_tensor`` as four dimensions and little-endian
float32 data) of the nested layer types (``dlib/dnn/core.h``: a layer writes its version, then the
layers below it, then its own details, so the versions come outermost first and the details
innermost first). Every version string, dimension, stride and padding is checked against the
architecture, as dlib's own deserialisers do, and the file must end where the network does;
anything else raises :class:`DlibFormatError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: The input side the network was locked to (``input_rgb_image_sized<150>``).
INPUT_SIDE = 150
#: The descriptor's size.
OUTPUT_DIM = 128


class DlibFormatError(ValueError):
    """The file is not the face-recognition network in dlib's serialisation (or is truncated)."""


# ----------------------------------------------------------------------------------------------
# The architecture: the layer types of ``anet_type``, listed from the input to the output.


@dataclass(frozen=True)
class Spec:
    """One layer of the architecture: ``kind`` and its template arguments."""

    kind: str  # con, affine, relu, max_pool, avg_pool, add_prev, tag, skip, fc_no_bias
    filters: int = 0  # con: filters; fc_no_bias: outputs
    window: int = 0  # con, pools: the square window side (0 for avg_pool_everything)
    stride: int = 1
    tag: int = 0  # tag, skip, add_prev: the tag id


def _block(n: int, stride: int) -> list[Spec]:
    # block<N,BN,stride,SUB> = BN<con<N,3,3,1,1,relu<BN<con<N,3,3,stride,stride,SUB>>>>>
    return [
        Spec("con", n, 3, stride), Spec("affine"), Spec("relu"), Spec("con", n, 3, 1),
        Spec("affine"),
    ]  # fmt: skip


def _ares(n: int) -> list[Spec]:
    # relu<add_prev1<block<N,affine,1,tag1<SUB>>>>
    return [Spec("tag", tag=1), *_block(n, 1), Spec("add_prev", tag=1), Spec("relu")]


def _ares_down(n: int) -> list[Spec]:
    # relu<add_prev2<avg_pool<2,2,2,2,skip1<tag2<block<N,affine,2,tag1<SUB>>>>>>>
    return [
        Spec("tag", tag=1), *_block(n, 2), Spec("tag", tag=2), Spec("skip", tag=1),
        Spec("avg_pool", window=2, stride=2), Spec("add_prev", tag=2), Spec("relu"),
    ]  # fmt: skip


def architecture() -> list[Spec]:
    """``anet_type``'s layers from the input to the output (loss layer excluded)."""
    layers = [Spec("con", 32, 7, 2), Spec("affine"), Spec("relu"), Spec("max_pool", 0, 3, 2)]
    layers += _ares(32) * 3  # alevel4
    layers += _ares_down(64) + _ares(64) * 3  # alevel3
    layers += _ares_down(128) + _ares(128) * 2  # alevel2
    layers += _ares_down(256) + _ares(256) * 2  # alevel1
    layers += _ares_down(256)  # alevel0
    layers += [Spec("avg_pool", window=0, stride=1), Spec("fc_no_bias", OUTPUT_DIM)]
    return layers


# ----------------------------------------------------------------------------------------------
# dlib's serialisation.


class _Reader:
    """Reads dlib's serialised primitives from ``data``; errors name the byte offset."""

    def __init__(self, data: bytes, name: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.name = name

    def fail(self, message: str) -> DlibFormatError:
        return DlibFormatError(f"{self.name}: {message} (at byte {self.pos} of {len(self.data)})")

    def take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.data):
            raise self.fail(f"truncated: {what} needs {n} bytes")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def integer(self, what: str, *, signed: bool = True) -> int:
        """``ser_helper::unpack_int``: a control byte (bit 7: negative; low 4 bits: the byte
        count, 1..8), then the magnitude's bytes, least significant first."""
        control = self.take(1, what)[0]
        size = control & 0x0F if signed else control & 0x8F
        if control & 0x70 or not 1 <= size <= 8:
            raise self.fail(f"bad integer control byte {control:#04x} in {what}")
        value = int.from_bytes(self.take(size, what), "little")
        return -value if signed and control & 0x80 else value

    def floating(self, what: str) -> float:
        """``float_details``: the mantissa then the exponent, both integers (exponents 32000,
        32001, 32002 mean inf, -inf and nan)."""
        first = self.data[self.pos] if self.pos < len(self.data) else 0
        if first & 0x70:
            raise self.fail(f"{what} is in dlib's old text float format, which is not supported")
        mantissa = self.integer(what)
        exponent = self.integer(what)
        special = {32000: float("inf"), 32001: float("-inf"), 32002: float("nan")}
        return special[exponent] if exponent in special else float(np.ldexp(mantissa, exponent))

    def string(self, what: str) -> str:
        size = self.integer(what, signed=False)
        try:
            return bytes(self.take(size, what)).decode("ascii")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what} is not a version string") from exc

    def version(self, allowed: tuple[str, ...], what: str) -> str:
        start = self.pos
        text = self.string(what)
        if text not in allowed:
            self.pos = start
            raise self.fail(f"expected {what} version {' or '.join(allowed)!s}, found {text!r}")
        return text

    def boolean(self, what: str) -> bool:
        ch = self.take(1, what)[0]
        if ch not in (ord("0"), ord("1")):
            raise self.fail(f"bad bool byte {ch:#04x} in {what}")
        return ch == ord("1")

    def int_version(self, allowed: range, what: str) -> int:
        version = self.integer(what)
        if version not in allowed:
            raise self.fail(f"unexpected {what} version {version}")
        return version

    def tensor(self, what: str) -> np.ndarray:
        """``resizable_tensor``: version 2, four dimensions, little-endian float32 data."""
        self.int_version(range(2, 3), f"{what} tensor")
        shape = tuple(self.integer(what) for _ in range(4))
        if any(d < 0 for d in shape):
            raise self.fail(f"negative dimension in {what}: {shape}")
        count = int(np.prod(shape))
        raw = self.take(4 * count, f"{what} data ({count} floats)")
        return np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)

    def alias(self, what: str) -> tuple[int, int, int, int]:
        """``alias_tensor``: version 1 and four dimensions (no data)."""
        self.int_version(range(1, 2), f"{what} alias")
        return tuple(self.integer(what) for _ in range(4))  # type: ignore[return-value]


@dataclass
class Layer:
    """A parsed layer: its spec and what its forward pass needs."""

    spec: Spec
    weight: np.ndarray | None = None  # con: (out, in, k, k); fc: (in, out)
    bias: np.ndarray | None = None
    padding: int = 0
    relu: bool = False  # con_6's fused relu
    disabled: bool = False  # relu_2 / affine_2's disabled flag
    scale: np.ndarray | None = None  # affine
    shift: np.ndarray | None = None


@dataclass
class Network:
    """What :func:`parse` reads: the input layer's means, the layers, the loss's settings."""

    means: tuple[float, float, float]
    layers: list[Layer]
    loss: dict[str, float] = field(default_factory=dict)


def _default_padding(spec: Spec) -> int:
    # layers.h: _padding = _stride != 1 ? 0 : _nr/2
    return 0 if spec.stride != 1 else spec.window // 2


def _con(r: _Reader, spec: Spec, what: str) -> Layer:
    version = r.version(("con_4", "con_5", "con_6"), what)
    params = r.tensor(f"{what} params").ravel()
    filters = r.integer(what)
    nr, nc = r.integer(what), r.integer(what)
    sy, sx = r.integer(what), r.integer(what)
    py, px = r.integer(what), r.integer(what)
    fshape = r.alias(f"{what} filters")
    bshape = r.alias(f"{what} biases")
    for _ in range(4):  # learning-rate and weight-decay multipliers
        r.floating(what)
    use_bias = r.boolean(what) if version in ("con_5", "con_6") else True
    use_relu = r.boolean(what) if version == "con_6" else False
    pad = _default_padding(spec)
    if (filters, nr, nc, sy, sx) != (spec.filters, spec.window, spec.window, spec.stride,
                                     spec.stride) or (py, px) != (pad, pad):  # fmt: skip
        raise r.fail(
            f"{what}: found {filters} filters {nr}x{nc} stride {sy},{sx} padding {py},{px}; "
            f"the network has {spec.filters} {spec.window}x{spec.window} stride {spec.stride} "
            f"padding {pad}"
        )
    nw = int(np.prod(fshape))
    if fshape[0] != filters or fshape[2:] != (nr, nc):
        raise r.fail(f"{what}: filter shape {fshape} does not match {filters} {nr}x{nc} filters")
    nb = int(np.prod(bshape)) if use_bias else 0
    if len(params) != nw + nb or (use_bias and nb != filters):
        raise r.fail(f"{what}: {len(params)} parameters, expected {nw} weights and {nb} biases")
    return Layer(
        spec,
        weight=params[:nw].reshape(fshape),
        bias=params[nw:] if use_bias else None,
        padding=pad,
        relu=use_relu,
    )


def _affine(r: _Reader, spec: Spec, what: str) -> Layer:
    start = r.pos
    version = r.string(what)
    if version in ("bn_con2", "bn_fc2"):
        r.pos = start
        raise r.fail(f"{what} is a batch-norm layer ({version}); only affine layers are supported")
    if version not in ("affine_", "affine_2"):
        r.pos = start
        raise r.fail(f"expected {what} version affine_ or affine_2, found {version!r}")
    params = r.tensor(f"{what} params").ravel()
    gshape = r.alias(f"{what} gamma")
    bshape = r.alias(f"{what} beta")
    mode = r.integer(what)  # CONV_MODE = 0: per channel; FC_MODE = 1: per (k, r, c)
    disabled = r.boolean(what) if version == "affine_2" else False
    if disabled:
        return Layer(spec, disabled=True)
    if mode not in (0, 1) or gshape != bshape or len(params) != 2 * int(np.prod(gshape)):
        raise r.fail(f"{what}: mode {mode}, gamma {gshape}, beta {bshape}, {len(params)} params")
    n = int(np.prod(gshape))
    shape = (gshape[1], 1, 1) if mode == 0 else gshape[1:]
    return Layer(spec, scale=params[:n].reshape(shape), shift=params[n:].reshape(shape))


def _pool(r: _Reader, spec: Spec, what: str) -> Layer:
    r.version((f"{spec.kind}_2",), what)
    nr, nc, sy, sx, py, px = (r.integer(what) for _ in range(6))
    pad = _default_padding(spec)
    if (nr, nc, sy, sx, py, px) != (spec.window, spec.window, spec.stride, spec.stride, pad, pad):
        raise r.fail(
            f"{what}: found window {nr}x{nc} stride {sy},{sx} padding {py},{px}; the network has "
            f"{spec.window}x{spec.window} stride {spec.stride} padding {pad}"
        )
    return Layer(spec, padding=pad)


def _fc(r: _Reader, spec: Spec, what: str) -> Layer:
    version = r.version(("fc_2", "fc_3"), what)
    outputs = r.integer(what, signed=False)
    inputs = r.integer(what, signed=False)
    params = r.tensor(f"{what} params").ravel()
    wshape = r.alias(f"{what} weights")
    r.alias(f"{what} biases")
    mode = r.integer(what)
    for _ in range(4):
        r.floating(what)
    if version == "fc_3":
        r.boolean(what)
    if mode != 1:  # FC_NO_BIAS
        raise r.fail(f"{what}: bias mode {mode}, the network's fc layer has no bias (mode 1)")
    if (
        outputs != spec.filters
        or wshape[:2] != (inputs, outputs)
        or len(params) != inputs * outputs
    ):
        raise r.fail(f"{what}: {inputs}->{outputs} outputs, weights {wshape}, {len(params)} params")
    return Layer(spec, weight=params.reshape(inputs, outputs))


def _details(r: _Reader, spec: Spec, what: str) -> Layer:
    if spec.kind == "con":
        return _con(r, spec, what)
    if spec.kind == "affine":
        return _affine(r, spec, what)
    if spec.kind == "relu":
        version = r.version(("relu_", "relu_2"), what)
        return Layer(spec, disabled=r.boolean(what) if version == "relu_2" else False)
    if spec.kind in ("max_pool", "avg_pool"):
        return _pool(r, spec, what)
    if spec.kind == "add_prev":
        r.version(("add_prev_",), what)
        return Layer(spec)
    if spec.kind == "fc_no_bias":
        return _fc(r, spec, what)
    raise AssertionError(spec.kind)


def parse(data: bytes, name: str = "<bytes>") -> Network:
    """The network serialised in ``data`` (the bytes of the ``.dat`` file)."""
    r = _Reader(data, name)
    specs = architecture()
    # add_loss_layer: version 1, loss_metric_ details, then the network.
    r.int_version(range(1, 2), "loss layer")
    loss: dict[str, float] = {}
    if r.version(("loss_metric_", "loss_metric_2"), "loss_metric") == "loss_metric_2":
        loss = {"margin": r.floating("loss margin"), "dist_thresh": r.floating("loss threshold")}
    # Each layer writes its version before the layers below it: outermost (output) first.
    versions: list[int] = [0] * len(specs)
    for i in reversed(range(len(specs))):
        kind = specs[i].kind
        what = f"layer {i} ({kind}) wrapper"
        if kind in ("tag", "skip"):
            versions[i] = r.int_version(range(1, 2), what)
        else:  # add_layer: the one on the input layer is the input specialisation (2..3)
            versions[i] = r.int_version(range(2, 4) if i == 0 else range(1, 3), what)
    # The input layer, then each layer's details from the input up.
    r.version(("input_rgb_image_sized",), "input layer")
    means = (r.floating("red mean"), r.floating("green mean"), r.floating("blue mean"))
    side = (r.integer("input rows", signed=False), r.integer("input cols", signed=False))
    if side != (INPUT_SIDE, INPUT_SIDE):
        raise r.fail(f"input layer is {side[0]}x{side[1]}, expected {INPUT_SIDE}x{INPUT_SIDE}")
    layers = []
    for i, spec in enumerate(specs):
        what = f"layer {i} ({spec.kind})"
        if spec.kind in ("tag", "skip"):
            layers.append(Layer(spec))
            continue
        layers.append(_details(r, spec, what))
        for flag in ("setup_called", "gradient_input_is_stale", "output_disabled"):
            r.boolean(f"{what} {flag}")
        r.tensor(f"{what} x_grad")
        r.tensor(f"{what} cached_output")
        if i == 0:  # the input specialisation: grad_final, and from version 3 the expansion
            r.tensor(f"{what} grad_final")
            if versions[i] == 3:
                r.integer(f"{what} sample_expansion_factor", signed=False)
        elif versions[i] == 2:
            r.tensor(f"{what} params_grad")
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} bytes left after the network")
    return Network(means=means, layers=layers, loss=loss)  # type: ignore[arg-type]
