import shlex

import pytest

from audit.cli.epsilon_command import build_epsilon_parser, epsilon_request, run_epsilon
from audit.privacy import dp_sgd_epsilon, termwise_epsilon


def _run(args: str) -> str:
    return run_epsilon(epsilon_request(build_epsilon_parser().parse_args(shlex.split(args))))


def _last(text: str) -> float:
    return float(text.splitlines()[-1])


def test_table2_cdp_example():
    out = _run(
        "--n-train 926 --batch-size 32 --epochs 1000 --noise-multiplier 1 "
        "--delta 0.0010799 --conversion classic"
    )
    assert _last(out) == pytest.approx(56.41, rel=0.01)
    assert "opacus-rdp/classic" in out


def test_cdp_defaults_to_improved_conversion_and_delta_one_over_n():
    out = _run("--n-train 926 --batch-size 32 --epochs 1000 --noise-multiplier 1")
    expected = dp_sgd_epsilon(
        n_train=926,
        batch_size=32,
        epochs=1000,
        noise_multiplier=1.0,
        delta=1 / 926,
        conversion="improved",
    )
    assert _last(out) == pytest.approx(expected, rel=1e-9)


def test_vae_ldp_example():
    out = _run("--mech vae-ldp --sigma 0.1 --latent-dim 100 --delta 5.2466e-4 --conversion classic")
    assert abs(_last(out) - 2366.15) < 0.1
    assert "epsilon_analytic" in out


def test_vae_ldp_defaults_to_the_analytic_bound():
    # Balle and Wang 2018, Theorem 8, for Delta = 60, sigma = 0.1, delta = 1/1906 (LFW20's |D|).
    out = _run("--mech vae-ldp --sigma 0.1 --latent-dim 100 --delta 5.2466e-4")
    assert _last(out) == pytest.approx(181965, rel=1e-3)
    assert "epsilon_classic: 2366.15" in out and "NOT a bound" in out


def test_vae_ldp_analytic():
    out = _run(
        "--mech vae-ldp --sigma 1000 --latent-dim 100 --delta 5.2466e-4 --conversion analytic"
    )
    assert 0 < _last(out) < 0.2366


def test_target_epsilon_prints_the_noise_multiplier_last():
    out = _run(
        "--n-train 926 --batch-size 32 --epochs 1000 --target-epsilon 56.41 --conversion classic"
    )
    z = _last(out)
    eps = dp_sgd_epsilon(
        n_train=926,
        batch_size=32,
        epochs=1000,
        noise_multiplier=z,
        delta=1 / 926,
        conversion="classic",
    )
    assert eps == pytest.approx(56.41, rel=1e-4) and eps <= 56.41


def test_termwise_refuses_composed_accounting():
    with pytest.raises(ValueError, match="'composed' is refused.*allowed: stacked"):
        _run(
            "--mech cdp-termwise --n-train 926 --batch-size 32 --epochs 1000 "
            "--noise-multiplier 1 --termwise-accounting composed"
        )


@pytest.mark.parametrize("accounting", ["stacked"])
def test_termwise(accounting):
    out = _run(
        f"--mech cdp-termwise --n-train 926 --batch-size 32 --epochs 1000 "
        f"--noise-multiplier 1 --termwise-accounting {accounting}"
    )
    expected = termwise_epsilon(
        n_train=926,
        batch_size=32,
        epochs=1000,
        noise_multiplier=1.0,
        delta=1 / 926,
        batch_clip_norm=1.0,
        accounting=accounting,
    )
    assert _last(out) == pytest.approx(expected, rel=1e-9)
    assert f"termwise-{accounting}" in out


def test_ldp_defaults_to_three_channels():
    assert _last(_run("--mech ldp --eps-i 100 --height 8 --width 8")) == pytest.approx(2400)
    out = _run("--mech ldp --eps-i 10000 --channels 3 --height 64 --width 64 --n-records 1906")
    assert "epsilon_dataset_sum: 5.718e+07" in out and _last(out) == pytest.approx(192 * 10000)


def test_ldp_epsilon_covers_any_two_records():
    out = _run("--mech ldp --eps-i 1 --channels 3 --height 64 --width 64")
    assert _last(out) == pytest.approx(192)
    assert "epsilon_m_neighbourhood: 3\n" in out
    same = _run("--mech ldp --eps-i 1 --channels 3 --height 64 --width 64 --pixel-block 4 --m 64")
    assert _last(same) == pytest.approx(192)
    assert _last(_run("--mech ldp --eps-i 1 --height 64 --width 64 --m 128")) == pytest.approx(96)


def test_every_mechanism_with_accounting_is_offered_and_none_is_not():
    from audit.cli.epsilon_command import accounted_mechanisms

    names = list(accounted_mechanisms())
    assert names == ["cdp", "cdp-termwise", "ldp", "vae-ldp", "dp2vae"]
    with pytest.raises(ValueError, match="invalid choice: 'none'"):
        build_epsilon_parser().parse_args(["--mech", "none"])


def test_every_option_has_help():
    epsilon = build_epsilon_parser()
    options = [
        a for a in epsilon._actions if a.option_strings and a.dest not in ("help", "verbose")
    ]
    assert len(options) >= 15
    assert all(a.help and len(a.help) > 15 for a in options)
