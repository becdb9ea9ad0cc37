"""Term-wise DP-Adam (PriVAE): per-partition gradients, sensitivity (Lemma 2), and that
C2 = 0 or alpha = 0 is standard DP-Adam bit for bit."""

from __future__ import annotations

import math

import pytest
import torch

from models.divergences import Divergence, mmd
from models.dp import (
    CLIP_EPS,
    DPSettings,
    GradSampleMode,
    PerExampleGradients,
    SampleLoss,
    clip_and_sum,
    private_gradient,
    train_dp_vae,
)
from models.dp.termwise_loop import (
    PartitionDivergence,
    PartitionedBatchTerm,
    PartitionGradients,
    TermwiseSettings,
    encoder_parameters,
    partition_assignment,
    record_partition,
    train_termwise_vae,
)
from models.training import VAETrainSettings
from tests.models.dp.test_dp_adam import batch, small_vae

LATENT = 4


def settings_for(
    c2: float,
    *,
    alpha: float = 1.0,
    partitions: int = 2,
    gradients: PartitionGradients = PartitionGradients.ENGINE,
) -> TermwiseSettings:
    return TermwiseSettings(
        divergence=Divergence.MMD,
        alpha=alpha,
        partitions=partitions,
        clip_norm=c2,
        seed=11,
        gradients=gradients,
    )


def naive_partition_grads(vae, x, y, noise, prior, part, *, alpha, partitions):
    """psi(s_j) alone, one ordinary backward pass per partition."""
    params = list(vae.parameters())
    out = []
    for j in range(partitions):
        vae.zero_grad(set_to_none=True)
        mask = part == j
        if int(mask.sum()) < 2:
            out.append([torch.zeros_like(p) for p in params])
            continue
        mu, logvar = vae.encode(x[mask], y[mask])
        z = mu + torch.exp(0.5 * logvar) * noise[mask]
        (alpha * mmd(z, prior[j])).backward()
        out.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params])
    vae.zero_grad(set_to_none=True)
    return [torch.stack([row[k] for row in out]) for k in range(len(params))]


@pytest.mark.parametrize(
    "mode", [GradSampleMode.HOOKS, GradSampleMode.FUNCTORCH, GradSampleMode.EW]
)
def test_per_partition_gradients_match_a_one_partition_loop(mode):
    vae = small_vae()
    x, y, noise = batch(9)
    part = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 1])
    prior = torch.randn(
        3, 4, LATENT, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )
    engine = PerExampleGradients(PartitionDivergence(vae, alpha=3.0, partitions=3), mode)
    per_record, values = engine.gradients(x, y, noise, prior, part)
    engine.close()
    assert values.shape == (3,)
    expected = naive_partition_grads(vae, x, y, noise, prior, part, alpha=3.0, partitions=3)
    for g, e in zip(per_record, expected, strict=True):
        grouped = g.new_zeros(e.shape).index_add_(0, part, g)
        torch.testing.assert_close(grouped, e, rtol=1e-5, atol=1e-10)


@pytest.mark.parametrize("mode", [GradSampleMode.HOOKS, GradSampleMode.EW, GradSampleMode.GHOST])
def test_autograd_and_opacus_partition_gradients_agree(mode):
    """Both per-partition methods, same prior draws (same seed), clipping active: equal sums."""
    vae = small_vae()
    x, y, noise = batch(10, seed=6)
    index = torch.arange(10)
    sums = []
    for gradients in PartitionGradients:
        term = PartitionedBatchTerm(
            vae,
            settings_for(0.05, partitions=3, gradients=gradients),
            n_train=10,
            batch_size=10,
            mode=mode,
        )
        sums.append(term.clipped_sum(x, y, noise, index))
        term.close()
    autograd, opacus = sums
    torch.testing.assert_close(autograd.norms, opacus.norms, rtol=1e-5, atol=1e-10)
    torch.testing.assert_close(autograd.values, opacus.values, rtol=1e-9, atol=1e-12)
    for a, o in zip(autograd.grads, opacus.grads, strict=True):
        torch.testing.assert_close(a, o, rtol=1e-5, atol=1e-10)


def test_book_keeping_clips_per_partition_like_a_one_partition_loop():
    vae = small_vae()
    x, y, noise = batch(9)
    part = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 1])
    prior = torch.randn(
        3, 4, LATENT, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )
    expected = naive_partition_grads(vae, x, y, noise, prior, part, alpha=3.0, partitions=3)
    encoder = {id(p) for p in encoder_parameters(vae)}
    expected = [e for p, e in zip(vae.parameters(), expected, strict=True) if id(p) in encoder]
    summed, norms = clip_and_sum(expected, clip_norm=0.05)
    engine = PerExampleGradients(
        PartitionDivergence(vae, alpha=3.0, partitions=3),
        GradSampleMode.BK,
        params=encoder_parameters(vae),
    )
    got = engine.clipped_sum(x, y, noise, prior, part, clip_norm=0.05, groups=part, num_groups=3)
    engine.close()
    assert float(norms.min()) > 0.05  # every partition is clipped
    torch.testing.assert_close(got.norms, norms, rtol=1e-8, atol=1e-12)
    for g, e in zip(got.grads, summed, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-8, atol=1e-12)


def test_psi_does_not_touch_the_decoder():
    vae = small_vae()
    x, y, noise = batch(6)
    prior = torch.randn(2, 3, LATENT, dtype=torch.float64)
    engine = PerExampleGradients(
        PartitionDivergence(vae, alpha=1.0, partitions=2), GradSampleMode.EW
    )
    grads, _ = engine.gradients(x, y, noise, prior, torch.tensor([0, 1] * 3))
    engine.close()
    encoder = {id(p) for p in encoder_parameters(vae)}
    for p, g in zip(vae.parameters(), grads, strict=True):
        assert (float(g.abs().max()) > 0) == (id(p) in encoder)


def clipped_sums(vae, records, index, *, c1, c2, seed_data=5):
    """(sample-wise clipped sum, batch-wise clipped sum) of the records ``index`` of the
    7-record D_train, with per-record reparameterisation noise and the same prior draws."""
    x, y, noise = records
    sample = PerExampleGradients(SampleLoss(vae, beta=1.0))
    s = sample.clipped_sum(x[index], y[index], noise[index], clip_norm=c1).grads
    sample.close()
    term = PartitionedBatchTerm(
        vae, settings_for(c2), n_train=len(x), batch_size=6, mode=GradSampleMode.EW
    )
    b = term.clipped_sum(x[index], y[index], noise[index], index).grads
    term.close()
    return s, b


def norm(tensors) -> float:
    return math.sqrt(sum(float(t.pow(2).sum()) for t in tensors))


def test_lemma_2_add_remove_sensitivity():
    """Removing one record moves the clipped phi-sum by <= C1 and the clipped psi-sum by <= 2 C2
    (PriVAE's Lemma 2 counts C2: valid only when partitions hold one record each)."""
    vae = small_vae()
    records = batch(7, seed=4)
    full = torch.arange(7)
    c1, c2 = 0.5, 0.05  # below every per-example / per-partition norm: all clipped
    s_full, b_full = clipped_sums(vae, records, full, c1=c1, c2=c2)
    assert norm(s_full) > 0 and norm(b_full) > 0
    for r in range(7):
        rest = full[full != r]
        s_rest, b_rest = clipped_sums(vae, records, rest, c1=c1, c2=c2)
        d_sample = norm([a - b for a, b in zip(s_full, s_rest, strict=True)])
        d_batch = norm([a - b for a, b in zip(b_full, b_rest, strict=True)])
        assert d_sample <= c1 + 1e-6
        assert d_batch <= 2 * c2 + 1e-6
        # in units of (C1, C2) the stacked pair moves by <= sqrt(1 + 2^2)
        assert math.hypot(d_sample / c1, d_batch / c2) <= math.sqrt(5) + 1e-6
        assert d_sample + d_batch <= c1 + 2 * c2 + 1e-6


def test_a_shared_partition_can_move_by_2_c2():
    """The factor 2 is attained: a partition {a, b} with g_a = v, g_b = -2 v sums to -v; without
    b it is v; clipped at C2 <= |v| the two differ by 2 C2, not the C2 PriVAE counts."""
    v = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    c2 = 1.0
    with_b, _ = clip_and_sum(
        [torch.cat([v, -2 * v])], clip_norm=c2, groups=torch.tensor([0, 0]), num_groups=1
    )
    without_b, _ = clip_and_sum([v], clip_norm=c2, groups=torch.tensor([0]), num_groups=1)
    assert norm([with_b[0] - without_b[0]]) == pytest.approx(2 * c2 * 5 / (5 + CLIP_EPS))


def test_partition_assignment_is_fixed_per_record():
    a = partition_assignment(10, 3, seed=0)
    assert torch.equal(a, partition_assignment(10, 3, seed=0))
    assert torch.equal(a, torch.tensor([record_partition(i, 3, seed=0) for i in range(10)]))
    assert not torch.equal(partition_assignment(50, 3, seed=0), partition_assignment(50, 3, seed=1))


@pytest.mark.parametrize("partitions", [1, 2, 4, 7])
def test_adding_or_removing_a_record_moves_no_other_partition(partitions):
    """The 2 C2 sensitivity needs each record's partition to depend on that record alone."""
    n = 40
    base = partition_assignment(n, partitions, seed=5)
    added = partition_assignment(n + 1, partitions, seed=5)  # a record appended at index n
    removed = partition_assignment(n - 1, partitions, seed=5)  # the last record removed
    assert torch.equal(added[:n], base)
    assert torch.equal(removed, base[: n - 1])
    for n_small in range(1, 12):  # every prefix agrees: no record depends on N_train
        assert torch.equal(partition_assignment(n_small, partitions, seed=5), base[:n_small])


def test_partition_assignment_is_roughly_uniform():
    # 3000 i.i.d. uniform draws over 3 partitions: each count ~ Binomial(3000, 1/3), sd 25.8;
    # 5 sd either side.
    counts = torch.bincount(partition_assignment(3000, 3, seed=0), minlength=3)
    assert ((counts - 1000).abs() < 5 * 25.9).all()


def data(n: int = 24):
    x, y, _ = batch(n, seed=9, dtype=torch.float32)
    return (x, y), (x[:6], y[:6])


def train_both(termwise: TermwiseSettings):
    train, val = data()
    settings = VAETrainSettings(epochs=2, batch_size=8, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(noise_multiplier=0.8, clip_norm=1.0, noise_seed=4)
    standard, termwise_model = small_vae(dtype=torch.float32), small_vae(dtype=torch.float32)
    train_dp_vae(standard, train, val, settings, dp)
    history = train_termwise_vae(termwise_model, train, val, settings, dp, termwise)
    return standard, termwise_model, history


@pytest.mark.parametrize("termwise", [settings_for(0.0), settings_for(0.5, alpha=0.0)])
def test_without_a_batch_term_termwise_is_dp_adam_exactly(termwise):
    standard, termwise_model, history = train_both(termwise)
    for a, b in zip(
        standard.state_dict().values(), termwise_model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    assert history.dp.batch_term.clip_norm_2 == 0.0


def test_with_a_batch_term_the_run_differs():
    standard, termwise_model, history = train_both(settings_for(0.5, alpha=5.0))
    assert not torch.equal(standard.fc_mu.weight, termwise_model.fc_mu.weight)
    assert history.dp.batch_term.clip_norm_2 == 0.5 and history.dp.batch_term.divergence == "mmd"


@pytest.mark.parametrize("gradients", list(PartitionGradients))
def test_ghost_sample_term_trains_with_either_partition_method(gradients):
    train, val = data()
    settings = VAETrainSettings(epochs=1, batch_size=8, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(
        noise_multiplier=0.8, clip_norm=1.0, noise_seed=4, grad_sample_mode=GradSampleMode.GHOST
    )
    vae = small_vae(dtype=torch.float32)
    history = train_termwise_vae(
        vae, train, val, settings, dp, settings_for(0.5, gradients=gradients)
    )
    assert history.dp.grad_sample_mode.value == "ghost" and math.isfinite(history.train_loss[0])


def test_batch_term_noise_stays_on_the_encoder():
    """Same DP-noise seed with and without the batch term: the sample-wise release is identical,
    so the difference is the batch-wise release, exactly 0 on the decoder."""
    vae = small_vae(dtype=torch.float32)
    x, y, noise = batch(8, seed=2, dtype=torch.float32)
    index = torch.arange(8)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0))
    term = PartitionedBatchTerm(
        vae, settings_for(0.3), n_train=8, batch_size=8, mode=GradSampleMode.EW
    )
    plain, _ = private_gradient(
        engine,
        (x, y, noise, index),
        dp=dp,
        expected_batch_size=8,
        generator=torch.Generator().manual_seed(1),
    )
    both, _ = private_gradient(
        engine,
        (x, y, noise, index),
        dp=dp,
        expected_batch_size=8,
        generator=torch.Generator().manual_seed(1),
        batch_term=term,
    )
    engine.close()
    term.close()
    encoder = {id(p) for p in encoder_parameters(vae)}
    for p, a, b in zip(vae.parameters(), plain, both, strict=True):
        assert torch.equal(a, b) != (id(p) in encoder)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": -1.0}, "alpha"),
        ({"clip_norm": -0.1}, "C2"),
        ({"partitions": 0}, "partitions"),
        ({"divergence": "kl"}, "kl"),
    ],
)
def test_termwise_settings_validate(kwargs, message):
    base = {"divergence": "mmd", "alpha": 1.0, "partitions": 2, "clip_norm": 0.1, "seed": 0}
    with pytest.raises(ValueError, match=message):
        TermwiseSettings(**{**base, **kwargs})


def test_termwise_clip_norms_are_respected_by_the_engine():
    vae = small_vae()
    x, y, noise = batch(8, seed=3)
    term = PartitionedBatchTerm(
        vae, settings_for(1e-3), n_train=8, batch_size=8, mode=GradSampleMode.EW
    )
    out = term.clipped_sum(x, y, noise, torch.arange(8))
    term.close()
    assert (out.norms > 1e-3).all()  # every partition clipped
    assert norm(out.grads) <= 2 * 1e-3 + 1e-9  # b = 2 partitions of at most C2 each


@pytest.mark.parametrize("gradients", list(PartitionGradients))
def test_batch_term_handles_an_empty_batch(gradients):
    vae = small_vae()
    x, y, noise = batch(0)
    term = PartitionedBatchTerm(
        vae, settings_for(0.3, gradients=gradients), n_train=8, batch_size=4, mode=GradSampleMode.EW
    )
    out = term.clipped_sum(x, y, noise, torch.arange(0))
    term.close()
    assert norm(out.grads) == 0 and out.values.abs().sum() == 0
