"""DP2-VAE (the DP2-VAE paper): keyed subsets, the decoder/encoder split, one stage-2 step against a
naive per-example loop, determinism and a small end-to-end run."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from models.dp import CLIP_EPS, DPSettings, GradSampleMode
from models.dp.dp2vae_decoder import (
    decoder_parameters,
    encoder_side_parameters,
    reinitialise_decoder,
    share_decoder,
)
from models.dp.dp2vae_loop import Dp2Settings, Stage2, train_dp2vae
from models.dp.dp2vae_subsets import poisson_batch, record_subset, subset_assignment
from models.factory import model_family
from models.lstm_vae import LstmVAE
from models.training import VAETrainSettings, vae_per_example_loss
from tests.models.dp.test_dp_adam import CLASSES, LATENT, batch, small_vae


def test_subsets_are_disjoint_and_fixed_per_record():
    k = 4
    base = subset_assignment(30, k, seed=7)
    grown = subset_assignment(37, k, seed=7)
    assert torch.equal(grown[:30], base)  # adding records moves no other record
    assert base.min() >= 0 and base.max() < k  # one subset per record: a partition
    assert [record_subset(i, k, seed=7) for i in range(30)] == base.tolist()
    assert not torch.equal(subset_assignment(30, k, seed=8), base)
    sizes = torch.bincount(grown, minlength=k)
    assert int(sizes.sum()) == 37 and (sizes > 0).all()


@pytest.mark.parametrize("kind", ["conv", "lstm"])
def test_decode_reads_exactly_the_decoder_parameters(kind):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        if kind == "conv":
            vae = small_vae()
        else:
            vae = LstmVAE(length=4, features=2, num_classes=CLASSES, latent_dim=LATENT, hidden=3)
            vae = vae.double()
    z, y = torch.randn(3, LATENT, dtype=torch.float64), torch.tensor([0, 1, 2])
    before = vae.decode(z, y).detach()
    with torch.no_grad():
        for p in encoder_side_parameters(vae):
            p.add_(1.0)
    assert torch.equal(vae.decode(z, y), before)
    with torch.no_grad():
        for p in decoder_parameters(vae):
            p.add_(0.1)
    assert not torch.allclose(vae.decode(z, y), before)
    names = {n for n, p in vae.named_parameters() if any(p is q for q in decoder_parameters(vae))}
    prefix = ("fc_dec.", "decoder.") if kind == "conv" else ("decoder.", "output.")
    assert names and all(n.startswith(prefix) for n in names)


def test_reinitialise_decoder_is_seeded_and_leaves_the_global_rng():
    vae = small_vae(dtype=torch.float32)
    enc = copy.deepcopy([p.detach() for p in encoder_side_parameters(vae)])
    state = torch.random.get_rng_state()
    reinitialise_decoder(vae, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    first = [p.detach().clone() for p in decoder_parameters(vae)]
    reinitialise_decoder(vae, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(first, decoder_parameters(vae), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(enc, encoder_side_parameters(vae), strict=True))
    reinitialise_decoder(vae, seed=6)
    assert not torch.equal(first[0], decoder_parameters(vae)[0])


def test_poisson_batch_truncates_to_the_cap():
    members = torch.arange(40)
    gen = torch.Generator().manual_seed(0)
    full, cut = poisson_batch(members, rate=1.0, max_batch_size=40, generator=gen)
    assert torch.equal(full, members) and not cut
    capped, cut = poisson_batch(members, rate=1.0, max_batch_size=7, generator=gen)
    assert len(capped) == 7 and cut and len(set(capped.tolist())) == 7
    none, cut = poisson_batch(members, rate=0.0, max_batch_size=7, generator=gen)
    assert len(none) == 0 and not cut


def three_vaes():
    """Decoder owner plus three subset VAEs (distinct encoders, the owner's decoder), float64."""
    owner = small_vae(seed=0)
    vaes = [share_decoder(small_vae(seed=10 + k), owner) for k in range(3)]
    return owner, vaes


def stage(vaes, owner, *, mode=GradSampleMode.BK, noise=0.0, clip=0.5, b=4):
    dp = DPSettings(noise_multiplier=noise, clip_norm=clip, noise_seed=0, grad_sample_mode=mode)
    return Stage2(vaes, owner, dp=dp, expected_batch_size=b, lr=1e-2, beta=1.0)


def snapshot(vaes):
    return [[p.detach().clone() for p in v.parameters()] for v in vaes]


def test_a_step_touches_only_the_decoder_and_the_chosen_encoder():
    owner, vaes = three_vaes()
    s = stage(vaes, owner, noise=1.0)
    before = snapshot(vaes)
    x, y, noise = batch(5)
    s.step(1, x, y, noise, torch.arange(5))
    s.close()
    after = snapshot(vaes)
    for k, vae in enumerate(vaes):
        decoder_ids = {id(p) for p in decoder_parameters(vae)}
        for p, a, b in zip(vae.parameters(), before[k], after[k], strict=True):
            moved = not torch.equal(a, b)
            assert moved == (id(p) in decoder_ids or k == 1), (k, p.shape)


def naive_decoder_gradient(vae, x, y, noise, *, clip, denominator):
    """One backward per record, decoder parameters only, clipped, summed, / B."""
    params = decoder_parameters(vae)
    total = [torch.zeros_like(p) for p in params]
    for i in range(len(x)):
        loss = vae_per_example_loss(vae, x[i : i + 1], y[i : i + 1], noise[i : i + 1], beta=1.0)
        grads = torch.autograd.grad(loss.sum(), params)
        norm = math.sqrt(sum(float(g.pow(2).sum()) for g in grads))
        factor = min(1.0, clip / (norm + CLIP_EPS))
        total = [t + factor * g for t, g in zip(total, grads, strict=True)]
    return [t / denominator for t in total]


@pytest.mark.parametrize("mode", [GradSampleMode.BK, GradSampleMode.HOOKS])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_the_decoder_update_is_the_private_gradient_of_a_naive_loop(mode, n):
    owner, vaes = three_vaes()
    reference = copy.deepcopy(vaes[2])  # its own copy of the decoder and of encoder 2
    x, y, noise = batch(n)
    expected = naive_decoder_gradient(reference, x, y, noise, clip=0.5, denominator=4)
    s = stage(vaes, owner, mode=mode)
    grads, _ = s.step(2, x, y, noise, torch.arange(n))
    s.close()
    for g, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-10)
    # the decoder took exactly Adam's step on that gradient
    params = decoder_parameters(reference)
    for p, e in zip(params, expected, strict=True):
        p.grad = e
    torch.optim.Adam(params, lr=1e-2).step()
    for got, want in zip(decoder_parameters(owner), params, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-10)


def test_ghost_mode_is_refused():
    owner, vaes = three_vaes()
    with pytest.raises(ValueError, match="'ghost'"):
        stage(vaes, owner, mode=GradSampleMode.GHOST)


def image_data(n: int = 24):
    gen = torch.Generator().manual_seed(4)
    x = torch.rand(n, 1, 8, 8, generator=gen)
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    return x, y


def run(*, noise_seed: int = 0, subsets: int = 3, max_batch: int | None = None):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_family((1, 8, 8), CLASSES).target_vae(
            latent_dim=LATENT, per_example_gradients=True
        )
    initial = copy.deepcopy(model.state_dict())
    settings = VAETrainSettings(epochs=2, batch_size=4, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=noise_seed)
    dp2 = Dp2Settings(subsets=subsets, pretrain_epochs=2, max_batch_size=max_batch)
    record = train_dp2vae(model, image_data(), settings, dp, dp2)
    return model, initial, record


def test_end_to_end_releases_a_label_conditional_decoder():
    model, initial, record = run(max_batch=3)
    assert record.steps == math.ceil(2 * 24 / 4) == sum(record.subset_choices)
    assert sum(record.subset_sizes) == 24 and record.subsets == 3
    assert record.max_batch_size == 3 and record.mean_batch_size <= 3
    assert record.subset_probability == pytest.approx(1 / 3)
    assert all(
        r == min(1.0, 4 / s) for r, s in zip(record.sample_rates, record.subset_sizes, strict=True)
    )
    assert record.pretrain_steps == tuple(2 * math.ceil(s / 4) for s in record.subset_sizes)
    assert len(record.train_loss) == 2 and all(math.isfinite(v) for v in record.train_loss)
    decoder = {id(p) for p in decoder_parameters(model)}
    names = {n for n, p in model.named_parameters() if id(p) in decoder}
    for key, value in model.state_dict().items():
        changed = not torch.equal(value, initial[key])
        assert changed == (key in names), key  # only the decoder moved; the encoder is initial
    labels = torch.tensor([0, 1, 2, 2])
    with torch.no_grad():
        images = model.decode(torch.randn(4, LATENT), labels)
    assert images.shape == (4, 1, 8, 8) and ((images >= 0) & (images <= 1)).all()
    assert record.to_dict()["subset_sizes"] == list(record.subset_sizes)


def test_training_is_seeded():
    model, _, record = run()
    again, _, record_again = run()
    assert record == record_again
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    other, _, _ = run(noise_seed=1)
    assert not torch.equal(model.fc_dec.weight, other.fc_dec.weight)


def test_series_vae_runs():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_family((4, 2), CLASSES).target_vae(latent_dim=LATENT)
    gen = torch.Generator().manual_seed(0)
    train = (torch.rand(12, 4, 2, generator=gen) * 2 - 1, torch.randint(0, CLASSES, (12,)))
    settings = VAETrainSettings(epochs=1, batch_size=4, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    record = train_dp2vae(model, train, settings, dp, Dp2Settings(subsets=2, pretrain_epochs=1))
    assert record.steps == 3 and isinstance(model, LstmVAE)
    assert model.decode(torch.randn(2, LATENT), torch.tensor([0, 1])).shape == (2, 4, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"subsets": 0, "pretrain_epochs": 1}, "subsets must be an integer >= 1, got 0"),
        ({"subsets": 2, "pretrain_epochs": -1}, "pretrain_epochs must be an integer >= 0"),
        ({"subsets": 2, "pretrain_epochs": 1, "max_batch_size": 0}, "max_batch_size"),
    ],
)
def test_settings_validate(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Dp2Settings(**kwargs)


def test_more_subsets_than_records_is_refused():
    model = small_vae(dtype=torch.float32)
    settings = VAETrainSettings(epochs=1, batch_size=2, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    x, y = image_data(4)
    with pytest.raises(ValueError, match="got 5"):
        train_dp2vae(model, (x, y), settings, dp, Dp2Settings(subsets=5, pretrain_epochs=1))


def test_an_empty_subset_releases_pure_noise_steps():
    x, y = image_data(6)
    sizes = torch.bincount(subset_assignment(6, 6, seed=3), minlength=6)
    assert (sizes == 0).any()  # seed 3 leaves a subset empty
    model = small_vae(dtype=torch.float32)
    settings = VAETrainSettings(epochs=2, batch_size=2, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    record = train_dp2vae(model, (x, y), settings, dp, Dp2Settings(subsets=6, pretrain_epochs=1))
    empty = [k for k, s in enumerate(record.subset_sizes) if s == 0]
    assert all(record.pretrain_steps[k] == 0 for k in empty)
    assert sum(record.subset_choices[k] for k in empty) > 0
    assert all(torch.isfinite(p).all() for p in model.parameters())
