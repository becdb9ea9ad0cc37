import math

import pytest

from audit.privacy import Conversion, GaussianConversion, PrivacyClaim


def test_claim_keeps_values_and_freezes_extra():
    claim = PrivacyClaim(epsilon=1, delta=1e-5, method="m", accountant="rdp", extra={"eps_i": 2.0})
    assert claim.epsilon == 1.0 and isinstance(claim.epsilon, float)
    assert claim.extra["eps_i"] == 2.0
    with pytest.raises(TypeError):
        claim.extra["eps_i"] = 3.0  # type: ignore[index]
    assert claim.to_dict() == {
        "epsilon": 1.0,
        "delta": 1e-5,
        "method": "m",
        "accountant": "rdp",
        "extra.eps_i": 2.0,
    }


def test_infinite_epsilon_means_no_privacy():
    assert math.isinf(
        PrivacyClaim(epsilon=math.inf, delta=0, method="none", accountant="none").epsilon
    )


@pytest.mark.parametrize(
    ("kwargs", "quoted"),
    [
        ({"epsilon": math.nan}, "nan"),
        ({"epsilon": -1.0}, "-1.0"),
        ({"delta": 1.0}, "1.0"),
        ({"delta": -0.1}, "-0.1"),
        ({"method": ""}, "''"),
        ({"extra": {"x": [1]}}, "[1]"),
    ],
)
def test_claim_rejects_bad_values_quoting_them(kwargs, quoted):
    base = {"epsilon": 1.0, "delta": 0.0, "method": "m", "accountant": "a"}
    with pytest.raises(ValueError, match=quoted.replace("[", r"\[").replace("]", r"\]")):
        PrivacyClaim(**{**base, **kwargs})


def test_conversions_are_string_enums():
    assert Conversion("classic") is Conversion.CLASSIC
    assert Conversion("improved") is Conversion.IMPROVED
    assert GaussianConversion("analytic") is GaussianConversion.ANALYTIC
