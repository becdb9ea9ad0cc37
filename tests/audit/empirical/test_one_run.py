"""The one-run audit: guesses, the gradient-canary hook, and bounds against the claim."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.empirical.canary_hooks import GradientCanaries, Switches
from audit.empirical.one_run import audit_one_run, one_run_mechanisms
from audit.empirical.one_run_settings import Broken, CanaryKind, OneRunSettings, count_correct
from tests.audit.empirical.fixtures import CTX, tiny_cell, tiny_data, tiny_dp_cell


def _cell_of(mech: str):
    return tiny_cell() if mech == "cdp" else tiny_dp_cell(mech)


def _naive_count(scores, included, k_plus, k_minus):
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    right = sum(bool(included[i]) for i in ranked[:k_plus])
    right += sum(not included[i] for i in ranked[len(ranked) - k_minus :])
    return k_plus + k_minus, right


@pytest.mark.parametrize(("k_plus", "k_minus"), [(1, 0), (0, 3), (5, 5), (10, 10)])
def test_count_correct_matches_a_loop(k_plus: int, k_minus: int) -> None:
    rng = np.random.default_rng(1)
    scores = rng.normal(size=20).round(1)  # ties on purpose
    included = rng.random(20) < 0.5
    assert count_correct(scores, included, k_plus=k_plus, k_minus=k_minus) == _naive_count(
        scores, included, k_plus, k_minus
    )


def test_settings_refuse_bad_guesses() -> None:
    with pytest.raises(ValueError, match="k_plus"):
        OneRunSettings(canaries=10, k_plus=8, k_minus=5)
    with pytest.raises(ValueError, match="canaries"):
        OneRunSettings(canaries=1)
    assert OneRunSettings(canaries=100, k_plus=10).guesses(claim_epsilon=1, delta=1e-5) == (10, 25)
    quarter = OneRunSettings(canaries=100, guess_rule="quarter")
    assert quarter.guesses(claim_epsilon=1, delta=1e-5) == (25, 25)


def _hook(broken: Broken = Broken.NONE) -> tuple[GradientCanaries, list[torch.nn.Parameter]]:
    params = [torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(5))]
    hook = GradientCanaries(
        included=np.array([True] * 6 + [False] * 4),
        sample_rate=1.0,
        raw_norm=50.0,
        seed=0,
        broken=broken,
    )
    hook.begin(params)
    return hook, params


def test_gradient_canaries_add_clipped_value_on_own_coordinates() -> None:
    hook, params = _hook()
    summed = [torch.zeros(3, 4), torch.zeros(5)]
    out = hook.add_canaries(summed, clip_norm=2.0)
    flat = torch.cat([g.reshape(-1) for g in out])
    coords = np.concatenate([[0], np.cumsum([12, 5])])[hook.param_of] + hook.offset
    assert len(set(coords.tolist())) == 10  # distinct coordinates
    expected = torch.zeros(17, dtype=torch.float64)
    expected[coords[:6]] = 2.0 * 50 / (50 + 1e-6)  # clipped to C, as clip_and_sum does
    assert torch.allclose(flat.double(), expected, atol=1e-6)
    assert summed[0].abs().sum() == 0  # the engine's sum is not modified in place
    hook.observe(out)
    assert np.allclose(hook.sums, expected[coords].numpy())


def test_gradient_canaries_unclipped_pass_raw_norm() -> None:
    hook, _ = _hook(Broken.NO_CLIP)
    assert hook.unclipped and not hook.noiseless
    out = hook.add_canaries([torch.zeros(3, 4), torch.zeros(5)], clip_norm=float("inf"))
    assert float(torch.cat([g.reshape(-1) for g in out]).max()) == pytest.approx(50.0)


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_canary_bound_below_claim(seed: int) -> None:
    # the correct mechanism over repeated seeded runs (z = 3, claim 1.63 at delta = 1e-5)
    audit = audit_one_run(
        tiny_cell(seed=seed), tiny_data(), CTX, OneRunSettings(canaries=200, seed=seed)
    )
    assert (
        max(audit.epsilon, audit.fdp_epsilon)
        < audit.claim.epsilon
        == pytest.approx(1.629, abs=1e-3)
    )
    assert audit.extra["parameter_move_epsilon"] < audit.claim.epsilon
    assert audit.bound.ceiling > audit.claim.epsilon  # the audit could have caught a bug


@pytest.mark.statistical
@pytest.mark.parametrize("broken", [Broken.NO_NOISE, Broken.NO_CLIP])
def test_gradient_canary_bound_exceeds_claim_of_broken_mechanism(broken: Broken) -> None:
    # seed 0: no-noise gives 2.32 (96 of 100 right), no-clip 2.50 (97 of 100) against 1.63
    audit = audit_one_run(
        tiny_cell(), tiny_data(), CTX, OneRunSettings(canaries=200, broken=broken)
    )
    assert min(audit.epsilon, audit.fdp_epsilon) > audit.claim.epsilon


@pytest.mark.slow
def test_input_canary_bound_below_claim() -> None:
    audit = audit_one_run(
        tiny_cell(), tiny_data(), CTX, OneRunSettings(kind=CanaryKind.INPUT, canaries=100)
    )
    assert 0 <= max(audit.epsilon, audit.fdp_epsilon) < audit.claim.epsilon
    assert audit.extra["n_train_with_canaries"] == 64 + int(audit.included.sum())


def test_one_run_refuses_other_mechanisms() -> None:
    from dataclasses import replace

    cell = replace(tiny_cell(), mech="ldp", mech_options=None)
    with pytest.raises(ValueError, match="cdp, cdp-termwise, dp2vae cells, got 'ldp'"):
        audit_one_run(cell, tiny_data(), CTX, OneRunSettings(canaries=10))
    assert one_run_mechanisms() == ("cdp", "cdp-termwise", "dp2vae")


class _CountingHook(Switches):
    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def observe(self, noisy) -> None:
        self.seen += 1


@pytest.mark.parametrize("mech", ["cdp", "cdp-termwise", "dp2vae"])
def test_an_empty_hook_leaves_training_bit_identical(mech: str) -> None:
    from dataclasses import replace

    from audit.empirical.one_run import extra_run
    from audit.mechanisms import get_mechanism

    cell, data = _cell_of(mech), tiny_data()
    cell = replace(cell, profile=replace(cell.profile, epochs=1))
    states = []
    for hook in (None, _CountingHook()):
        run = extra_run(cell, data, CTX, hook)
        states.append(run.model.state_dict())
    assert hook.seen == 4  # ceil(1 epoch x 64 / 16) steps, each observed once
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert get_mechanism(cell.mech).canary_sample_rate(cell, 64) is not None


#: z per mechanism where the claim (delta 1e-5) lies below the m = 200 audit's ceiling (3.49),
#: so that a broken mechanism can show: cdp-termwise z = 6 claims 1.88, dp2vae z = 250 claims
#: 1.69 (its valid bound; the DP2-VAE paper's Theorem 3.1 value there is 0.05).
AUDITABLE_Z = {"cdp-termwise": 6.0, "dp2vae": 250.0}


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mech", sorted(AUDITABLE_Z))
def test_gradient_canary_bound_below_claim_of_other_dp_mechanisms(mech: str, seed: int) -> None:
    cell = tiny_dp_cell(mech, z=AUDITABLE_Z[mech], seed=seed)
    audit = audit_one_run(cell, tiny_data(), CTX, OneRunSettings(canaries=200, seed=seed))
    assert max(audit.epsilon, audit.fdp_epsilon) < audit.claim.epsilon < audit.bound.ceiling


@pytest.mark.statistical
@pytest.mark.parametrize("broken", [Broken.NO_NOISE, Broken.NO_CLIP])
@pytest.mark.parametrize("mech", sorted(AUDITABLE_Z))
def test_gradient_canary_bound_exceeds_claim_of_other_broken_mechanisms(
    mech: str, broken: Broken
) -> None:
    # seed 0, m = 200: no-noise 2.72 (termwise) and 2.04 (dp2vae); without clipping a canary of
    # norm 100 z C outweighs the noise z C (cdp-termwise 1.88 and dp2vae 1.69 claimed)
    z = AUDITABLE_Z[mech]
    settings = OneRunSettings(canaries=200, broken=broken, canary_norm=100 * z)
    audit = audit_one_run(tiny_dp_cell(mech, z=z), tiny_data(), CTX, settings)
    assert min(audit.epsilon, audit.fdp_epsilon) > audit.claim.epsilon


def test_duplicated_input_canaries_are_compared_with_the_group_claim() -> None:
    from dataclasses import replace

    from audit.privacy.group import group_rdp_epsilon

    cell = tiny_cell()
    cell = replace(cell, profile=replace(cell.profile, epochs=1))
    settings = OneRunSettings(
        kind=CanaryKind.INPUT, canaries=10, copies=3, input_design="marked-mean"
    )
    audit = audit_one_run(cell, tiny_data(), CTX, settings)
    n_in = int(audit.included.sum())
    assert audit.extra["n_train_with_canaries"] == 64 + 3 * n_in
    single = audit.extra["single_record_epsilon"]
    # the group of 3 is bounded as a group of 4 (Mironov's Prop. 2 needs a power of two)
    assert audit.claim.epsilon == group_rdp_epsilon(audit.claim.event, 3, delta=1e-5) > single
    assert audit.claim.extra["group_size"] == 3 and "group of 3" in audit.claim.method
    with pytest.raises(ValueError, match="copies > 1 applies to input canaries only"):
        OneRunSettings(canaries=10, copies=2)
    with pytest.raises(ValueError, match="copies must be an integer >= 1"):
        OneRunSettings(kind=CanaryKind.INPUT, canaries=10, copies=0)


def test_label_slot_hook_sets_the_canary_slots_and_nothing_else() -> None:
    from audit.empirical.canary_hooks import LABEL_SLOT_LOGVAR, LabelSlots
    from models.vae import ConditionalConvVAE

    torch.manual_seed(0)
    model = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=15, latent_dim=4)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    LabelSlots(5).begin(list(model.parameters()))
    for name, p in model.named_parameters():
        if name in ("fc_mu.weight", "fc_logvar.weight", "fc_dec.weight"):
            fill = LABEL_SLOT_LOGVAR if name == "fc_logvar.weight" else 0.0
            assert bool((p[:, -5:] == fill).all()), name
            assert torch.equal(p[:, :-5], before[name][:, :-5]), name
        else:
            assert torch.equal(p, before[name]), name
    with pytest.raises(ValueError, match="conditional conv VAE"):
        LabelSlots(5).begin([p for n, p in model.named_parameters() if "fc_dec" in n])


def test_label_slot_audit_builds_the_model_with_a_slot_per_canary() -> None:
    from dataclasses import replace

    cell = tiny_cell()
    cell = replace(cell, profile=replace(cell.profile, epochs=1))
    settings = OneRunSettings(kind=CanaryKind.INPUT, canaries=20, input_design="label-slot")
    audit = audit_one_run(cell, tiny_data(), CTX, settings)
    assert audit.extra["num_classes"] == 10 + 20
    assert audit.extra["n_train_with_canaries"] == 64 + int(audit.included.sum())
    assert "label-slot contrast on the decoder alone" in audit.score
    assert audit.scores.shape == (20,) and np.isfinite(audit.scores).all()


@pytest.mark.statistical
def test_label_slot_bound_exceeds_claim_of_broken_mechanism() -> None:
    # seed 0, no noise: 45-47 of 50 right (by the machine's thread count), f-DP 3.27-4.12 against
    # the claim 1.40 (N 86); every canary guessed (the design rule, made for the claim, guesses
    # too few to exceed it). Steinke et al.'s one-run bound needs 46 of 50 right to pass 1.40 (its
    # ceiling at m = 50 is 2.78), so it is held to the claim's neighbourhood only; the gradient
    # canaries' broken-mechanism tests hold it above the claim.
    settings = OneRunSettings(
        kind=CanaryKind.INPUT,
        canaries=50,
        input_design="label-slot",
        broken=Broken.NO_NOISE,
        k_plus=25,
        k_minus=25,
    )
    audit = audit_one_run(tiny_cell(), tiny_data(), CTX, settings)
    assert audit.bound.v >= 0.9 * audit.bound.r
    assert audit.fdp_epsilon > audit.claim.epsilon and audit.epsilon > 0.9 * audit.claim.epsilon


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_label_slot_bound_below_claim(seed: int) -> None:
    settings = OneRunSettings(
        kind=CanaryKind.INPUT, canaries=50, input_design="label-slot", seed=seed
    )
    audit = audit_one_run(tiny_cell(seed=seed), tiny_data(), CTX, settings)
    assert 0 <= max(audit.epsilon, audit.fdp_epsilon) < audit.claim.epsilon
