import pytest

from audit.privacy import (
    pixelization_claim,
    pixelization_epsilon,
    pixelization_scale,
    valid_block_sizes,
)


def test_scale_follows_fan():
    assert pixelization_scale(eps_i=1000, block=1, neighborhood=64) == pytest.approx(0.064)
    # 255 m / (b^2 eps) on the 0..255 scale, m / (b^2 eps) on 0..1.
    assert pixelization_scale(eps_i=5, block=4, neighborhood=64) * 255 == pytest.approx(
        255 * 64 / (16 * 5)
    )


def test_claim_per_record_and_table2_dataset_sum():
    claim = pixelization_claim(
        eps_i=10000, channels=3, height=64, width=64, neighborhood=64, n_records=1906
    )
    assert claim.epsilon == 192 * 10000 and claim.delta == 0
    assert claim.extra["epsilon_m_neighbourhood"] == 30000
    # The trade-off paper, Table 2, LDP LFW20 eps_i = 10000: 5.718e+07 = 1906 * 3 * 10000.
    assert claim.extra["epsilon_dataset_sum"] == pytest.approx(5.718e7)
    assert "not a per-record bound" in claim.extra["notes"]
    assert claim.extra["eps_i"] == 10000
    plain = pixelization_claim(eps_i=1.0, channels=1, height=8, width=8, neighborhood=8)
    assert "epsilon_dataset_sum" not in plain.extra


def test_epsilon_covers_any_two_images_for_every_block_side():
    # 64x64x3, m = 64 (the trade-off paper): 3 * 64 * 64 / 64 = 192 per unit eps_i, whatever b.
    for b in valid_block_sizes(64, 64):
        assert pixelization_epsilon(
            eps_i=1.0, channels=3, height=64, width=64, block=b, neighborhood=64
        ) == pytest.approx(192)


@pytest.mark.parametrize(
    ("kwargs", "quoted"),
    [
        ({"channels": 0}, "0"),
        ({"n_records": -5}, "-5"),
        ({"eps_i": 0.0}, "0.0"),
        ({"block": 3}, "valid b: 1, 2, 4, 8"),
        ({"neighborhood": 65}, "choose 1..64"),
    ],
)
def test_claim_bad_inputs(kwargs, quoted):
    base = {"eps_i": 1.0, "channels": 3, "height": 8, "width": 8, "neighborhood": 8}
    with pytest.raises(ValueError, match=quoted.replace(".", r"\.").replace("-", r"\-")):
        pixelization_claim(**{**base, **kwargs})
