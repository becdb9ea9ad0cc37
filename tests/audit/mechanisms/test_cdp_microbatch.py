"""``cdp --microbatch K``: the option's checks, the cell's hash (unchanged at k = 1), what the
loop receives and what the row's privacy notes say; the accounting is that of k = 1."""

from __future__ import annotations

import pytest

from audit.mechanisms import get_mechanism
from audit.mechanisms.cdp import CdpOptions
from models.dp import unit_clip_norm
from tests.audit.mechanisms.test_cdp import CDP, TERMWISE, make_cell, make_data, train


def test_microbatch_one_keeps_the_cells_hash_and_k_changes_it():
    plain = make_cell()
    assert make_cell(microbatch=1).config_hash == plain.config_hash
    assert make_cell(microbatch=1).noise_key == plain.noise_key
    four = make_cell(microbatch=4)
    assert four.config_hash != plain.config_hash
    assert four.canonical()["options"]["microbatch"] == 4
    assert CdpOptions(microbatch=1).canonical() == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "microbatch must be an integer >= 1, got 0"),
        (-2, "got -2"),
        (2.5, "got 2.5"),
        ("two", "got 'two'"),
        (True, "got True"),
    ],
)
def test_a_bad_microbatch_is_refused(value, message):
    with pytest.raises(ValueError, match=message):
        CdpOptions(microbatch=value)


def test_a_microbatch_above_the_batch_size_is_refused_before_training():
    options = CdpOptions(microbatch=5)
    with pytest.raises(ValueError, match="--microbatch 5 exceeds the batch size B = 4"):
        CDP.check_options(options, grid=(1.0,), batch_size=4)
    CDP.check_options(CdpOptions(microbatch=4), grid=(1.0,), batch_size=4)


def test_only_cdp_reads_the_option():
    assert "microbatch" in CDP.options_type.names()
    assert "microbatch" not in TERMWISE.options_type.names()
    for name in ("dp2vae", "ldp", "vae-ldp"):
        assert "microbatch" not in get_mechanism(name).options_type.names()


def test_a_microbatched_cell_trains_grouped_and_its_notes_say_so():
    data, cell = make_data(), make_cell(microbatch=2, clip_norm=3.0)
    trained = train(CDP, cell, data)
    assert trained.history.dp.microbatch == 2
    claim = CDP.claim(cell, data, trained)
    plain = CDP.claim(make_cell(clip_norm=3.0), data, train(CDP, make_cell(clip_norm=3.0), data))
    assert claim.epsilon == plain.epsilon  # the accounting does not depend on k
    assert claim.extra["microbatch"] == 2
    assert claim.extra["microbatch_clip_norm"] == unit_clip_norm(3.0, 2) == 1.5
    note = claim.extra["microbatch_bound"]
    assert "not a bound for add/remove of one record" in note and ";" not in note
    assert "microbatch" not in " ".join(map(str, plain.extra))
