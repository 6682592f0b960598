"""Encoded keys sort like their values and decode back to equal values."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.state.key_codec import KEY_TYPES, decode_key, encode_key

VALUES: dict[type, st.SearchStrategy[Any]] = {
    int: st.integers(min_value=-(2**1000), max_value=2**1000) | st.integers(-300, 300),
    float: st.floats(allow_nan=False),
    bool: st.booleans(),
    str: st.text(),
    bytes: st.binary(),
    Decimal: st.decimals(allow_nan=False, allow_infinity=False),
    date: st.dates(),
    datetime: st.datetimes(),
}
AWARE = st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)).flatmap(
    lambda dt: st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))]).map(
        lambda tz: dt.replace(tzinfo=tz)
    )
)


def test_every_key_type_has_a_strategy() -> None:
    assert set(VALUES) == KEY_TYPES


@pytest.mark.parametrize("tp", sorted(VALUES, key=str))
@given(data=st.data())
def test_order_and_round_trip(tp: type, data: st.DataObject) -> None:
    a, b = data.draw(VALUES[tp]), data.draw(VALUES[tp])
    ea, eb = encode_key([tp], [a]), encode_key([tp], [b])
    assert decode_key([tp], ea) == (a,)
    assert (ea < eb) == (a < b) and (ea == eb) == (a == b)


@given(st.lists(st.tuples(st.integers(-3, 3), st.text("a\x00\x01\xff"), st.binary()), min_size=2))
def test_composite_keys_sort_like_tuples(keys: list[tuple[int, str, bytes]]) -> None:
    types = [int, str, bytes]
    encoded = sorted(encode_key(types, k) for k in keys)
    assert [decode_key(types, e) for e in encoded] == sorted(keys)


@given(AWARE, AWARE)
def test_aware_datetimes_sort_by_instant_and_decode_in_utc(a: datetime, b: datetime) -> None:
    ea, eb = encode_key([datetime], [a]), encode_key([datetime], [b])
    assert decode_key([datetime], ea) == (a,)
    assert decode_key([datetime], ea)[0].tzinfo is UTC
    assert (ea < eb) == (a < b)


def test_negative_zero_is_zero_and_decimals_keep_value_not_scale() -> None:
    assert encode_key([float], [-0.0]) == encode_key([float], [0.0])
    assert decode_key([Decimal], encode_key([Decimal], [Decimal("1.50")])) == (Decimal("1.5"),)
    assert encode_key([Decimal], [Decimal("-0.00")]) == encode_key([Decimal], [Decimal(0)])


@pytest.mark.parametrize(
    ("tp", "value"),
    [
        (float, float("nan")),
        (Decimal, Decimal("NaN")),
        (Decimal, Decimal("-Infinity")),
        (int, 2**1016),
    ],
)
def test_unencodable_values_raise(tp: type, value: object) -> None:
    with pytest.raises(ValueError):
        encode_key([tp], [value])


@pytest.mark.parametrize("data", [b"", b"\x85\x01", b"\x81\x01\x00", b"\x80a\x00\x02", b"abc"])
def test_malformed_keys_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_key([int, str], data)
