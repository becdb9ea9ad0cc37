"""Threat-model types: what a release provides, what each attack needs, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.attack import AttackData, ResultKey, Variant
from attacks.distances import Distance
from attacks.reconstruction import ReconstructionAttack
from attacks.registry import available_attacks, get_attack
from attacks.threat import Capability, Records, Release, applicable, missing, require
from tests.attacks.test_reconstruction import small_vae

C = Capability


def some_records(n: int = 4) -> Records:
    return Records(torch.rand(n, 1, 8, 8), torch.zeros(n, dtype=torch.int64))


def test_whole_vae_release_provides_encoder_and_decoder() -> None:
    vae = small_vae(0)
    release = Release(model=vae)
    assert release.decoder is vae
    assert release.capabilities == {C.ENCODER, C.DECODER}


def test_capabilities_of_each_kind_of_release() -> None:
    vae = small_vae(0)
    full = Release(
        model=vae, samples=some_records(), reference=some_records(), reference_models=[vae]
    )
    assert full.capabilities == set(Capability)
    assert isinstance(full.reference_models, tuple)
    assert Release(decoder=vae).capabilities == {C.DECODER}
    assert Release(samples=some_records()).capabilities == {C.SAMPLES}
    assert Release().capabilities == frozenset()


# Which attacks each mechanism's release admits (DESIGN.md, "Threat models and attacks").
EXPECTED = {
    "whole VAE": (
        {"model": True},
        {"reconstruction", "latent-search", "likelihood"},
    ),
    "whole VAE + D_gen + reference": (
        {"model": True, "samples": True, "reference": True},
        {"reconstruction", "latent-search", "likelihood", "monte-carlo", "domias"},
    ),
    "decoder only (dp2vae)": ({"decoder": True}, {"latent-search"}),
    "D_gen only": ({"samples": True}, {"monte-carlo"}),
    "D_gen + reference": ({"samples": True, "reference": True}, {"monte-carlo", "domias"}),
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_applicable_attacks_per_release(kind: str) -> None:
    given, expected = EXPECTED[kind]
    vae = small_vae(0)
    fields = {
        "model": vae if given.get("model") else None,
        "decoder": vae if given.get("decoder") else None,
        "samples": some_records() if given.get("samples") else None,
        "reference": some_records() if given.get("reference") else None,
    }
    release = Release(**fields)
    assert {name for name in available_attacks() if applicable(get_attack(name), release)} == (
        expected
    )


def test_require_names_what_is_missing_and_what_there_is() -> None:
    release = Release(samples=some_records())
    assert missing(ReconstructionAttack, release) == {C.ENCODER, C.DECODER}
    with pytest.raises(
        ValueError,
        match=r"'reconstruction' needs decoder, encoder, which this release lacks "
        r"\(it has samples\); check applicable",
    ):
        require(ReconstructionAttack, release)
    with pytest.raises(ValueError, match=r"\(it has nothing\)"):
        require(ReconstructionAttack, Release())


def test_reconstruction_run_release_equals_run() -> None:
    vae = small_vae(1)
    data = AttackData(
        x=torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0)),
        y=torch.arange(6) % 3,
        is_member=np.arange(6) < 3,
    )
    attack = ReconstructionAttack(seed=0, n_samples=3, distances=("mse", "ssim"))
    old = attack.run(vae, data)
    new = attack.run_release(Release(model=vae), data)
    assert list(new) == [
        ResultKey(Distance.MSE, Variant.MEAN),
        ResultKey(Distance.SSIM, Variant.MEAN),
    ]
    for key, result in new.items():
        np.testing.assert_array_equal(result.scores, old[key.distance].scores)
        assert result.to_row()["variant"] == "mean"


class NoLatentDim(torch.nn.Module):
    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return z


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model": NoLatentDim()}, "model must have encode"),
        ({"decoder": NoLatentDim()}, "decoder must have decode.*NoLatentDim"),
        ({"samples": (torch.zeros(2, 3), torch.zeros(2))}, "samples must be Records"),
        ({"reference_models": "vae"}, "reference_models must be a sequence"),
        ({"reference_models": [NoLatentDim()]}, r"reference_models\[0\] must have decode"),
    ],
)
def test_bad_release_is_refused(fields, message) -> None:
    with pytest.raises(ValueError, match=message):
        Release(**fields)


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (torch.zeros(0, 3), torch.zeros(0, dtype=torch.int64), "n >= 1"),
        (torch.zeros(2, 3), torch.zeros(3, dtype=torch.int64), r"shape \(2,\) to match x"),
        (torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, dtype=torch.int64), "floating"),
        (torch.full((2, 3), float("nan")), torch.zeros(2, dtype=torch.int64), "6 NaN"),
    ],
)
def test_bad_records_are_refused(x, y, message) -> None:
    with pytest.raises(ValueError, match=message):
        Records(x, y)


# ---- release kinds: what a mechanism publishes ------------------------------------------------


def test_each_release_kind_gives_its_capabilities() -> None:
    from attacks.threat import ReleaseKind, released_capabilities

    assert released_capabilities(ReleaseKind.WHOLE_VAE) == {C.ENCODER, C.DECODER, C.SAMPLES}
    assert released_capabilities(ReleaseKind.DECODER_ONLY) == {C.DECODER, C.SAMPLES}
    assert released_capabilities(ReleaseKind.SAMPLES_ONLY) == {C.SAMPLES}
    assert ReleaseKind.DECODER_ONLY.capabilities == {C.DECODER, C.SAMPLES}
    with pytest.raises(ValueError, match="release kind must be a ReleaseKind .*'whole'"):
        released_capabilities("whole")  # type: ignore[arg-type]


def test_a_release_of_each_kind_holds_exactly_what_the_kind_gives() -> None:
    from attacks.threat import ReleaseKind

    vae, gen = small_vae(0), some_records()
    for kind in ReleaseKind:
        release = Release.of_kind(kind, model=vae, samples=gen)
        assert release.capabilities == kind.capabilities, kind
    with_ref = Release.of_kind(ReleaseKind.SAMPLES_ONLY, model=vae, samples=gen, reference=gen)
    assert with_ref.capabilities == {C.SAMPLES, C.REFERENCE_RECORDS}


def test_a_decoder_only_release_makes_the_reconstruction_attack_inapplicable() -> None:
    from attacks.threat import ReleaseKind

    assert applicable(ReconstructionAttack, ReleaseKind.WHOLE_VAE)
    assert not applicable(ReconstructionAttack, ReleaseKind.DECODER_ONLY)
    assert missing(ReconstructionAttack, ReleaseKind.DECODER_ONLY) == {C.ENCODER}
    assert applicable(get_attack("latent-search"), ReleaseKind.DECODER_ONLY)
    assert applicable(get_attack("monte-carlo"), ReleaseKind.SAMPLES_ONLY)
