from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from audit.config import CACHE_SCHEMA, CellConfig, SweepConfig
from audit.mechanisms import cell_from_canonical, make_cell
from audit.mechanisms.cdp import CdpOptions
from audit.profiles import PROFILES, ProfileName, override_profile
from dpvae_core.seeding import Purpose, derive_seed

QUICK = PROFILES[ProfileName.QUICK]
#: The hashes of the two cells of test_a_cells_hash_is_pinned_under_its_cache_schema.
PINNED_CDP, PINNED_NONE = "7cac80c407643493", "74804c4012ad567c"
#: Their noise keys: what their hashes were before the cache schema (main at e044bf5), so that
#: the schema redrew no noise.
NOISE_CDP, NOISE_NONE = "66dd7f7af31e5a2f", "94f20125862347e4"
#: Their training keys: their hashes under cache schema 3 (main at b9830c5), which keyed the
#: targets' training draws, so that schema 4 (digests) redrew no training.
TRAINING_CDP, TRAINING_NONE = "98b4dd82dfa2fd2a", "176b4b7fefdea090"


def _sweep(**kw):
    base = dict(
        dataset="digits",
        mechs=("none",),
        profile_name=ProfileName.QUICK,
        profile=QUICK,
        seeds=(0,),
        out=Path("x"),
    )
    return SweepConfig(**{**base, **kw})


def test_cell_hash_is_canonical_and_sensitive():
    a = CellConfig("digits", "cdp", "noise_multiplier", 1.0, 0, QUICK)
    assert (
        a.config_hash == CellConfig("digits", "cdp", "noise_multiplier", 1.0, 0, QUICK).config_hash
    )
    assert a.config_hash != replace(a, seed=1).config_hash
    assert a.config_hash != replace(a, profile=replace(QUICK, epochs=31)).config_hash


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dataset": "mnist"}, "unknown dataset 'mnist'"),
        ({"seeds": (-1,)}, "non-negative"),
        ({"seeds": (1, 1)}, "distinct"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
        ({"grid": (1.0, -2.0)}, "-2.0"),
        ({"grid": (float("nan"),)}, "nan"),
    ],
)
def test_sweep_config_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _sweep(**kwargs)


@pytest.mark.parametrize(
    ("field", "value"), [("epochs", 0), ("lr", -1.0), ("batch_size", 2.5), ("max_train", 1)]
)
def test_profile_overrides_are_validated(field, value):
    with pytest.raises(ValueError, match=field.replace("_", "-")):
        override_profile(QUICK, **{field: value})


def test_seeds_are_split_per_purpose():
    assert derive_seed(0, Purpose.SPLIT) != derive_seed(0, Purpose.ATTACK)
    assert derive_seed(0, Purpose.SPLIT) == derive_seed(0, Purpose.SPLIT)
    with pytest.raises(ValueError, match="seed"):
        derive_seed(None, Purpose.SPLIT)  # type: ignore[arg-type]


def test_a_cells_hash_is_pinned_under_its_cache_schema():
    """The canonical config is the identity (settings at their default left out) plus the cache
    schema; hashes and noise keys are pinned, so a change that moves a hash without raising
    CACHE_SCHEMA, or moves a noise key at all, fails here."""
    options = {"profile_name": "quick", "data_sha256": "d" * 64, "clip_norm": 1.0}
    cell = make_cell("digits", "cdp", "noise_multiplier", 1.0, 0, QUICK, options)
    assert cell.options == (("profile_name", "quick"), ("data_sha256", "d" * 64))
    assert cell.mech_options == CdpOptions(clip_norm=1.0)  # typed
    canonical = cell.canonical()
    assert canonical["cache_schema"] == CACHE_SCHEMA == 4
    assert "attacks" not in canonical and "audit" not in canonical  # at their defaults
    assert "reference_models" not in canonical["profile"]  # this cell trains none
    assert cell.config_hash == PINNED_CDP and cell.noise_key == NOISE_CDP
    base = CellConfig("digits", "none", "none", None, 3, QUICK, cell.options[:1])
    assert base.config_hash == PINNED_NONE and base.noise_key == NOISE_NONE
    assert (cell.training_key, base.training_key) == (TRAINING_CDP, TRAINING_NONE)
    audited = replace(cell, audit=True, attacks=("reconstruction", "likelihood"))
    assert audited.canonical()["audit"] is True
    assert audited.canonical()["attacks"] == ["reconstruction", "likelihood"]
    assert audited.canonical()["profile"]["reference_models"] == QUICK.reference_models
    assert cell_from_canonical(audited.canonical()).canonical() == audited.canonical()
    assert cell_from_canonical(canonical).canonical() == canonical  # read back, same identity


#: Mixed-precision cells' hashes at fe194d2, before a cell's identity said in which arithmetic its
#: DP-Adam ran: (mech, param_name, param_value, precision) -> hash. The bf16 DP-Adam cells then
#: shared their hash with the bf16 cells cached before c2c07a8, which ran DP-Adam in float32.
BEFORE_DP_PRECISION = {
    ("cdp", "noise_multiplier", 1.0, "bf16"): "46764d3d363e7c75",
    ("cdp-termwise", "noise_multiplier", 1.0, "bf16"): "3087182feb83eb50",
    ("cdp", "noise_multiplier", 1.0, "fp16"): "1b258fae391301ca",  # DP-Adam in float32
    ("none", "none", None, "bf16"): "87db0ff5e4b320ef",
    ("dp2vae", "noise_multiplier", 1.0, "bf16"): "e3450d1508d90368",  # DP2-VAE stays float32
}
#: The float32 twin of the cdp cells above (also pinned at fe194d2).
FLOAT32_CDP = "7f868b402adc9bc6"
#: The bf16 DP-Adam cells' hashes with ``dp_precision`` in their identity.
WITH_DP_PRECISION = {"cdp": "c9e4d021cc829e1d", "cdp-termwise": "ee6806ce6333d18a"}


@pytest.mark.parametrize(("key", "before"), list(BEFORE_DP_PRECISION.items()))
def test_a_bf16_dp_adam_cell_says_so_and_only_it_changes_hash(key, before):
    """A bf16 cell whose DP-Adam runs book-keeping in bf16 holds ``dp_precision`` in its
    identity, so it never takes the hash (or the cached models) of a cell from before that ran
    DP-Adam in float32; every other cell, float32 ones included, keeps its hash, and the draws
    (noise and training keys) stay the float32 twin's."""
    mech, param_name, param_value, precision = key
    run = {"profile_name": "quick", "data_sha256": "d" * 64}
    cell = make_cell(
        "digits", mech, param_name, param_value, 0, QUICK, {**run, "precision": precision}
    )
    twin = make_cell("digits", mech, param_name, param_value, 0, QUICK, run)
    dp_in_bf16 = mech.startswith("cdp") and precision == "bf16"
    assert cell.dp_precision == ("bf16" if dp_in_bf16 else None)
    assert ("dp_precision" in cell.canonical()) is dp_in_bf16
    assert (cell.config_hash != before) is dp_in_bf16
    assert cell.config_hash == (WITH_DP_PRECISION[mech] if dp_in_bf16 else before)
    assert (cell.noise_key, cell.training_key) == (twin.noise_key, twin.training_key)
    assert cell_from_canonical(cell.canonical()).canonical() == cell.canonical()
    if mech == "cdp":
        assert twin.config_hash == FLOAT32_CDP and "dp_precision" not in twin.canonical()


def test_a_mixed_precision_cell_of_an_unregistered_mechanism_has_no_identity():
    cell = CellConfig("digits", "unregistered", "noise_multiplier", 1.0, 0, QUICK)
    assert cell.config_hash  # float32: no DP arithmetic to ask for
    bf16 = replace(cell, options=(("precision", "bf16"),))
    with pytest.raises(ValueError, match="'unregistered' is not registered"):
        bf16.canonical()


@pytest.mark.parametrize("schema", [None, 1, CACHE_SCHEMA + 1])
def test_a_cell_config_of_another_cache_schema_is_refused_in_one_line(schema):
    run = {"profile_name": "quick"}
    cell = make_cell("digits", "none", "none", None, 0, QUICK, run)
    body = {k: v for k, v in cell.canonical().items() if k != "cache_schema"}
    if schema is not None:
        body["cache_schema"] = schema
    found = 1 if schema is None else schema
    message = f"cache schema {found} and this code reads {CACHE_SCHEMA}; rerun"
    with pytest.raises(ValueError, match=message) as e:
        cell_from_canonical(body)
    assert "\n" not in str(e.value) and "--out" in str(e.value)
    other = replace(cell, attacks=("reconstruction", "monte-carlo"))
    assert other.canonical()["attacks"] == ["reconstruction", "monte-carlo"]
    assert other.config_hash != cell.config_hash  # a list that changes results is identity


@pytest.mark.parametrize(
    ("dataset", "profile", "cap"),
    [
        ("lfw20", "quick", 200),
        ("lfw20", "standard", 200),
        ("lfw50", "quick", 500),
        ("lfw20", "paper", None),
        ("lfw-subset", "quick", 50),
        ("digits", "standard", 50),
    ],
)
def test_downloadable_lfw_caps_d_train_per_person(dataset, profile, cap):
    from audit.profiles import profile_for_dataset

    assert profile_for_dataset(ProfileName(profile), dataset).max_train == cap


def test_max_train_on_the_command_line_overrides_the_per_person_cap():
    from audit.cli.run_command import build_run_parser, config_from_args

    args = build_run_parser().parse_args(["--dataset", "lfw20", "--mech", "none"])
    assert config_from_args(args).profile.max_train == 200
    args = build_run_parser().parse_args(
        ["--dataset", "lfw20", "--mech", "none", "--max-train", "60"]
    )
    assert config_from_args(args).profile.max_train == 60


def test_reference_models_are_in_the_hash_of_calibrating_cells_only():
    """R changes the rows of cells whose attacks calibrate (latent search, likelihood) and of no
    other cell, so the others keep their hashes (and R = 0 is hashed as no reference models)."""
    plain = CellConfig("digits", "none", "none", None, 0, QUICK)
    none = replace(plain, profile=replace(QUICK, reference_models=None))
    assert QUICK.reference_models == 2 and plain.reference_models == 0
    assert "reference_models" not in plain.canonical()["profile"]
    assert plain.config_hash == none.config_hash
    for attacks in (("latent-search",), ("reconstruction", "likelihood")):
        cell = replace(plain, attacks=attacks)
        assert cell.reference_models == 2
        assert cell.canonical()["profile"]["reference_models"] == 2
        more = replace(cell, profile=replace(QUICK, reference_models=4))
        assert more.config_hash != cell.config_hash
        off = replace(cell, profile=replace(QUICK, reference_models=0))
        assert off.reference_models == 0
        assert off.config_hash == replace(cell, profile=none.profile).config_hash
    monte_carlo = replace(plain, attacks=("monte-carlo", "domias"))
    assert monte_carlo.reference_models == 0
    assert "reference_models" not in monte_carlo.canonical()["profile"]


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_reference_models_must_be_a_count(value):
    with pytest.raises(ValueError, match="reference-models must be an integer >= 0"):
        override_profile(QUICK, reference_models=value)


def test_one_run_mixes_cells_with_and_without_reference_models():
    """By default every cell calibrates (dp2vae's latent search, the baseline's latent search
    and likelihood); a later sweep into the same run with ``--attack reconstruction`` adds cells
    that train none: all belong to one run configuration."""
    from audit.results import manifest_of
    from audit.sweep.plan import build_cells

    mechs = ("none", "dp2vae")
    pairs = build_cells(_sweep(mechs=mechs, grid=(1.0,)))
    assert all(cell.reference_models == QUICK.reference_models for cell, _ in pairs)
    plain = build_cells(_sweep(grid=(1.0,), attacks=("reconstruction",)))
    assert all(cell.reference_models == 0 for cell, _ in plain)
    settings = manifest_of([cell.canonical() for cell, _ in pairs + plain])["settings"]
    assert "reference_models" not in settings


@pytest.mark.parametrize(
    ("dataset", "profile", "lr", "epochs", "classifier"),
    [
        ("lfw20", "quick", 1e-3, 120, "face-embedding"),  # LFW_QUICK_OVERRIDES + FACE_SETTINGS
        ("lfw50", "quick", 1e-3, 120, "face-embedding"),
        ("lfw20", "standard", 1e-3, 300, "face-embedding"),  # the standard profile's lr, epochs
        ("lfw-subset", "quick", 2e-3, 40, None),  # the quick profile's own values
    ],
)
def test_lfw_quick_takes_its_measured_learning_rate_epochs_and_classifier(
    dataset, profile, lr, epochs, classifier
):
    from audit.profiles import profile_for_dataset

    got = profile_for_dataset(ProfileName(profile), dataset)
    assert (got.lr, got.epochs, got.classifier) == (lr, epochs, classifier)


def test_the_classifier_flag_overrides_the_dataset_profile():
    from audit.cli.run_command import build_run_parser, config_from_args

    base = ["--dataset", "lfw20", "--mech", "none"]
    args = build_run_parser().parse_args([*base, "--classifier", "resnet-half"])
    assert config_from_args(args).profile.classifier == "resnet-half"
    with pytest.raises(ValueError, match="invalid choice: 'vgg16'"):
        build_run_parser().parse_args([*base, "--classifier", "vgg16"])


def test_a_flag_overrides_the_dataset_profile_value():
    from audit.cli.run_command import build_run_parser, config_from_args

    args = build_run_parser().parse_args(["--dataset", "lfw20", "--mech", "none"])
    assert config_from_args(args).profile.lr == 1e-3
    args = build_run_parser().parse_args(["--dataset", "lfw20", "--mech", "none", "--lr", "5e-4"])
    assert config_from_args(args).profile.lr == 5e-4


def test_lfw_subset_quick_draws_200_generated_records_for_cis_budget():
    from audit.profiles import profile_for_dataset

    assert profile_for_dataset(ProfileName.QUICK, "lfw-subset").gen_records == 200
    assert profile_for_dataset(ProfileName.STANDARD, "lfw-subset").gen_records == 1000
    assert profile_for_dataset(ProfileName.QUICK, "digits").gen_records == 1000
