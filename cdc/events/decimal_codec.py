"""Kafka Connect ``Decimal``: big-endian two's-complement unscaled bytes plus a ``scale``.

All arithmetic is on integers and decimal strings, never on floats, so any number of digits
survives exactly.
"""

from __future__ import annotations

import binascii
import functools
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, Inexact, InvalidOperation

# Wide enough for any decimal a JSON text can hold; a rescale that would round raises instead.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact, InvalidOperation])


def decode_base64(text: str) -> bytes:
    """Strict base64 (as JsonConverter writes ``bytes``); raises ``ValueError`` on bad input."""
    return binascii.a2b_base64(text, strict_mode=True)


def encode_base64(data: bytes) -> str:
    """Base64 text of ``data`` without a trailing newline."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def decimal_from_unscaled(unscaled: int, scale: int) -> Decimal:
    """``unscaled * 10**-scale`` exactly, keeping ``scale`` as the exponent."""
    return Decimal(f"{unscaled}E{-scale}")


def decimal_from_bytes(data: bytes, scale: int) -> Decimal:
    """Decode Connect ``Decimal`` bytes; raises ``ValueError`` for empty input."""
    if not data:
        raise ValueError("empty decimal bytes")
    return decimal_from_unscaled(int.from_bytes(data, "big", signed=True), scale)


def unscaled_at(value: Decimal, scale: int) -> int | None:
    """The integer ``value * 10**scale``, or None when that is not exact (or not finite)."""
    if not value.is_finite():
        return None
    if 0 <= scale <= _FAST_SCALE and -_FAST_SCALE <= value.adjusted() <= _FAST_SCALE:
        # value == n/d in lowest terms, so value * 10**scale is whole iff d divides 10**scale;
        # twice as fast as scaleb, and the bounds keep n and d small.
        numerator, denominator = value.as_integer_ratio()
        factor, rest = divmod(_pow10(scale), denominator)
        return numerator * factor if not rest else None
    try:
        scaled = value.scaleb(scale, context=_EXACT)  # moves the exponent only: exact
    except (Inexact, InvalidOperation):
        return None
    unscaled = int(scaled)
    return unscaled if unscaled == scaled else None


_FAST_SCALE = 64


@functools.lru_cache(maxsize=128)
def _pow10(scale: int) -> int:
    return int(10**scale)


def decimal_to_bytes(value: Decimal, scale: int) -> bytes:
    """Encode ``value`` at ``scale`` as minimal two's-complement bytes (Java BigInteger style).

    Raises ``ValueError`` when ``value`` has more fractional digits than ``scale`` allows.
    """
    unscaled = unscaled_at(value, scale)
    if unscaled is None:
        raise ValueError(f"{value} does not fit scale {scale} exactly")
    magnitude_bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(magnitude_bits // 8 + 1, "big", signed=True)


def decimal_to_base64(value: Decimal, scale: int) -> str:
    """``encode_base64(decimal_to_bytes(value, scale))`` in one call (the changelog's hot path)."""
    unscaled = unscaled_at(value, scale)
    if unscaled is None:
        raise ValueError(f"{value} does not fit scale {scale} exactly")
    magnitude_bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    data = unscaled.to_bytes(magnitude_bits // 8 + 1, "big", signed=True)
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def rescale(value: Decimal, scale: int) -> Decimal:
    """``value`` with exponent ``-scale`` when that is exact, else ``value`` unchanged.

    JSON-number decimals (``decimal.format=NUMERIC``) may drop trailing zeros; this gives them
    the same form as the base64 encoding of the same column.
    """
    try:
        return value.quantize(_quantum(scale), context=_EXACT)
    except (Inexact, InvalidOperation):
        return value


@functools.lru_cache(maxsize=128)
def _quantum(scale: int) -> Decimal:
    return Decimal(f"1E{-scale}")
