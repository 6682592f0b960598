"""State-table declarations, key forms, row checks and the exact row encoding."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.errors import ChangeEventError
from cdc.state import StateTable

ALL_TYPES = StateTable(
    "everything",
    {
        "id": int,
        "f": float,
        "s": str,
        "b": bool,
        "d": Decimal,
        "day": date,
        "at": datetime,
        "raw": bytes,
        "doc": dict,
        "items": list,
    },
    key="id",
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=10,
)
ROWS = st.fixed_dictionaries(
    {"id": st.integers()},
    optional={
        "f": st.floats(),
        "s": st.text(),
        "b": st.booleans(),
        "d": st.decimals(),
        "day": st.dates(),
        "at": st.datetimes(timezones=st.none() | st.timezones()),
        "raw": st.binary(),
        "doc": st.dictionaries(st.text(), JSON),
        "items": st.lists(JSON),
    },
)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same type; NaN equals NaN, decimals keep their scale, datetimes their
    UTC offset."""
    if isinstance(a, Decimal):
        return isinstance(b, Decimal) and str(a) == str(b)
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    if isinstance(a, datetime):
        # Wall time and offset, not ``==``: PEP 495 makes an aware datetime at an ambiguous
        # local time (a zone's DST end) unequal to every datetime of another tzinfo.
        return (
            isinstance(b, datetime)
            and a.utcoffset() == b.utcoffset()
            and a.replace(tzinfo=None) == b.replace(tzinfo=None)
        )
    return bool(a == b) and type(a) is type(b)


@given(ROWS)
def test_rows_round_trip_exactly(row: dict[str, Any]) -> None:
    key, data = ALL_TYPES.encode_row(row)
    decoded = ALL_TYPES.decode_row(data)
    assert decoded.keys() == ALL_TYPES.columns.keys()
    for column, value in decoded.items():
        assert same(row.get(column), value), column
    assert ALL_TYPES.decode_key(key) == {"id": row["id"]}


def test_declaration_errors() -> None:
    with pytest.raises(ValueError, match="not a column"):
        StateTable("t", {"a": int}, key="b")
    with pytest.raises(ValueError, match="cannot be JSON"):
        StateTable("t", {"a": dict}, key="a")
    with pytest.raises(ValueError, match="unsupported column types"):
        StateTable("t", {"a": int, "c": complex}, key="a")
    with pytest.raises(ValueError, match="distinct"):
        StateTable("t", {"a": int}, key=("a", "a"))
    with pytest.raises(ValueError, match="table name"):
        StateTable("", {"a": int}, key="a")


def test_key_forms() -> None:
    table = StateTable("t", {"a": int, "b": str, "v": int}, key=("a", "b"))
    assert table.key_of((1, "x")) == table.key_of({"a": 1, "b": "x", "v": 9}) == {"a": 1, "b": "x"}
    one = StateTable("u", {"id": str}, key="id")
    assert one.encode_key("k") == one.encode_key(("k",)) == one.encode_key({"id": "k"})
    with pytest.raises(ChangeEventError, match="tuple of 2 values"):
        table.key_of(1)


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"id": "1"}, "id", "expected int, got str"),
        ({"id": True}, "id", "expected int, got bool"),
        ({"s": "x"}, "id", "key column is missing"),
        ({"id": 1, "day": datetime(2024, 1, 1)}, "day", "expected date"),
        ({"id": 1, "doc": {"a": (1, 2)}}, "doc", "JSON object"),
        ({"id": 1, "doc": {1: "a"}}, "doc", "JSON object"),
        ({"id": 1, "items": [float("nan")]}, "items", "JSON array"),
        ({"id": 1, "nope": 1}, "nope", "unknown column"),
        ({"id": 1, "d": 1.5}, "d", "expected Decimal, got float"),
    ],
)
def test_bad_rows_name_the_field(row: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ChangeEventError, match=message) as info:
        ALL_TYPES.encode_row(row)
    assert info.value.field == field
    assert "table everything" in str(info.value)


def test_ints_widen_and_values_are_stored_not_referenced() -> None:
    doc: dict[str, Any] = {"n": [1]}
    _, data = ALL_TYPES.encode_row({"id": 1, "f": 2, "d": 3, "doc": doc, "raw": bytearray(b"x")})
    doc["n"].append(2)
    row = ALL_TYPES.decode_row(data)
    assert row["f"] == 2.0 and type(row["f"]) is float
    assert row["d"] == Decimal(3) and row["doc"] == {"n": [1]} and row["raw"] == b"x"


def test_encoding_is_compact_json_of_non_null_columns() -> None:
    at = datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    _, data = ALL_TYPES.encode_row({"id": 7, "d": Decimal("1.50"), "at": at, "s": None})
    assert data == b'{"id":7,"d":"1.50","at":"2024-05-01T12:30:00+02:00"}'


def test_decimal_columns_with_a_scale_hold_values_at_that_scale() -> None:
    prices = StateTable(
        "prices",
        {"amount": Decimal, "note": str, "rate": Decimal},
        key="amount",
        scales={"amount": 2, "rate": 0},
    )
    key, data = prices.encode_row({"amount": Decimal("1.5"), "rate": 7})
    assert str(prices.decode_row(data)["amount"]) == "1.50"
    assert str(prices.decode_key(key)["amount"]) == "1.50"  # the key codec drops the zero
    assert prices.key_of(Decimal("1.500")) == {"amount": Decimal("1.50")}
    bad_rows: list[tuple[dict[str, Any], str]] = [
        ({"amount": Decimal("1.234")}, "amount"),
        ({"amount": 1, "rate": Decimal("0.5")}, "rate"),
        ({"amount": Decimal("NaN")}, "amount"),
    ]
    for bad, field in bad_rows:
        with pytest.raises(ChangeEventError, match="at most") as info:
            prices.encode_row(bad)
        assert info.value.field == field
    with pytest.raises(ValueError, match="not a Decimal column"):
        StateTable("t", {"a": int, "b": str}, key="a", scales={"b": 2})
    with pytest.raises(ValueError, match=">= 0"):
        StateTable("t", {"a": int, "b": Decimal}, key="a", scales={"b": -1})
