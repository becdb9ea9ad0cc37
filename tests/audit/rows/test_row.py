"""The row record: its fields are the CSV's columns, in order."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from audit.check import CHECK_COLUMNS
from audit.rows.row import COLUMNS, RESULT_KEY, Row


def a_row(**overrides) -> Row:
    values = {
        f.name: ("x" if f.type == "str" else 1)
        for f in fields(Row)
        if f.name not in ("utility_valid", "phi")
    }
    values.update(attack="reconstruction", distance="mse", variant="mean")
    return Row(**{**values, **overrides})


def test_the_record_generates_the_columns_in_order():
    assert tuple(f.name for f in fields(Row)) == COLUMNS
    assert COLUMNS.index("attack") == COLUMNS.index("distance") - 1
    assert COLUMNS.index("variant") == COLUMNS.index("distance") + 1
    assert COLUMNS[:5] == ("dataset", "mech", "param_name", "param_value", "seed")
    assert set(RESULT_KEY) <= set(COLUMNS) and set(CHECK_COLUMNS) <= set(COLUMNS)
    assert list(CHECK_COLUMNS) == sorted(CHECK_COLUMNS, key=COLUMNS.index)
    row = a_row()
    assert tuple(row.to_dict()) == COLUMNS
    assert row.utility_valid is None and math.isnan(row.phi)  # filled when collected


@pytest.mark.parametrize("field", ["attack", "distance", "variant"])
@pytest.mark.parametrize("value", ["", "recon_struction", 3])
def test_result_keys_must_be_plain_names(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a non-empty name without '_'"):
        a_row(**{field: value})
