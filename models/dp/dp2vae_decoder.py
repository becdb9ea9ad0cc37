"""DP2-VAE's split of a VAE into the released decoder and the encoder side, which trains
non-privately: the submodules ``decode`` uses per VAE class (:data:`DECODER_MODULES`), their
parameters and every other parameter, re-drawing the decoder's weights, and pointing K VAEs at
one shared decoder (:mod:`models.dp.dp2vae_loop` trains them).
"""

from __future__ import annotations

import torch
from torch import nn

from models.lstm_vae import LstmVAE
from models.vae import ConditionalConvVAE

#: Submodules that ``decode(z, y)`` uses, per VAE class; every other parameter is the encoder's
#: side (for the LSTM VAE that includes the auxiliary classifier on mu, which decode never reads).
DECODER_MODULES: dict[type[nn.Module], tuple[str, ...]] = {
    ConditionalConvVAE: ("fc_dec", "decoder"),
    LstmVAE: ("decoder", "output"),
}


def decoder_module_names(vae: nn.Module) -> tuple[str, ...]:
    """Names of ``vae``'s submodules that ``decode`` uses (:data:`DECODER_MODULES`)."""
    for cls, names in DECODER_MODULES.items():
        if isinstance(vae, cls):
            return names
    known = ", ".join(c.__name__ for c in DECODER_MODULES)
    raise ValueError(f"DP2-VAE does not know the decoder of {type(vae).__name__}; known: {known}")


def decoder_parameters(vae: nn.Module) -> list[nn.Parameter]:
    """The released decoder's parameters, in ``vae.parameters()`` order."""
    ids = {id(p) for n in decoder_module_names(vae) for p in getattr(vae, n).parameters()}
    return [p for p in vae.parameters() if id(p) in ids]


def encoder_side_parameters(vae: nn.Module) -> list[nn.Parameter]:
    """Every parameter that is not the decoder's (encoder, heads, auxiliary classifier)."""
    ids = {id(p) for p in decoder_parameters(vae)}
    return [p for p in vae.parameters() if id(p) not in ids]


def reinitialise_decoder(vae: nn.Module, *, seed: int) -> None:
    """Re-draw the decoder's weights with each layer's own ``reset_parameters``, from a CPU
    generator seeded with ``seed`` (the global generator's state is restored afterwards)."""
    if any(p.device.type != "cpu" for p in decoder_parameters(vae)):
        raise ValueError("re-initialise the decoder on the CPU, then move the model")
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        for name in decoder_module_names(vae):
            for module in getattr(vae, name).modules():
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()


def share_decoder(vae: nn.Module, owner: nn.Module) -> nn.Module:
    """Point ``vae``'s decoder submodules at ``owner``'s (the same module objects); returns vae."""
    for name in decoder_module_names(owner):
        setattr(vae, name, getattr(owner, name))
    return vae
