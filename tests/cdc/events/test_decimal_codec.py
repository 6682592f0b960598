"""The Connect Decimal codec round-trips every decimal exactly, whatever its size."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.events.decimal_codec import (
    decimal_from_bytes,
    decimal_to_bytes,
    decode_base64,
    encode_base64,
    rescale,
    unscaled_at,
)

scales = st.integers(min_value=0, max_value=40)
unscaled_values = st.integers(min_value=-(10**60), max_value=10**60)


@given(unscaled_values, scales)
def test_bytes_round_trip_keeps_value_and_scale(unscaled: int, scale: int) -> None:
    value = Decimal(f"{unscaled}E-{scale}")
    decoded = decimal_from_bytes(
        decode_base64(encode_base64(decimal_to_bytes(value, scale))), scale
    )
    assert decoded == value
    assert decoded.as_tuple().exponent == -scale


@given(unscaled_values, scales)
def test_encoding_is_minimal_twos_complement(unscaled: int, scale: int) -> None:
    data = decimal_to_bytes(Decimal(f"{unscaled}E-{scale}"), scale)
    assert int.from_bytes(data, "big", signed=True) == unscaled
    if len(data) > 1:  # like Java's BigInteger.toByteArray: no redundant sign byte
        redundant_zero = data[0] == 0x00 and data[1] < 0x80
        redundant_ones = data[0] == 0xFF and data[1] >= 0x80
        assert not (redundant_zero or redundant_ones)


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6), st.integers(6, 30))
def test_rescale_to_a_wider_scale_is_exact(value: Decimal, scale: int) -> None:
    rescaled = rescale(value, scale)
    assert rescaled == value
    assert rescaled.as_tuple().exponent == -scale


@pytest.mark.parametrize(
    ("text", "scale", "unscaled"),
    [("200000.0000", 4, 2000000000), ("10", 4, 100000), ("-0.01", 2, -1), ("1.5", 0, None)],
)
def test_unscaled_at(text: str, scale: int, unscaled: int | None) -> None:
    assert unscaled_at(Decimal(text), scale) == unscaled


@given(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=-90, max_value=90),
    st.integers(min_value=-3, max_value=90),
)
def test_unscaled_at_is_exact_on_both_sides_of_the_fast_path(
    digits: int, exponent: int, scale: int
) -> None:
    value = Decimal(digits).scaleb(exponent)
    with localcontext() as ctx:
        ctx.prec = 400
        whole = value.scaleb(scale)
    expected = int(whole) if whole == whole.to_integral_value() else None
    assert unscaled_at(value, scale) == expected


def test_known_encodings() -> None:
    assert encode_base64(decimal_to_bytes(Decimal("200000.0000"), 4)) == "dzWUAA=="
    assert encode_base64(decimal_to_bytes(Decimal("10.0000"), 4)) == "AYag"
    assert decimal_to_bytes(Decimal("-1"), 0) == b"\xff"
    assert decimal_to_bytes(Decimal("128"), 0) == b"\x00\x80"


def test_inexact_scale_and_non_finite_values_are_refused() -> None:
    with pytest.raises(ValueError, match="scale"):
        decimal_to_bytes(Decimal("1.25"), 1)
    with pytest.raises(ValueError):
        decimal_to_bytes(Decimal("NaN"), 0)
    with pytest.raises(ValueError):
        decimal_from_bytes(b"", 2)
