"""Kafka Connect decimals as Spark SQL expressions, evaluated on the JVM (no Python UDF).

A Connect ``Decimal`` travels as base64 text of the big-endian two's-complement unscaled value.
Up to 8 bytes (most values) its hex text is sign-extended to 16 digits and read by ``conv`` as a
signed 64-bit number. Longer, its hex text, stripped of redundant sign-extension bytes, is read
as at most two 64-bit chunks with ``conv`` (exact, unsigned) and combined in DECIMAL(38,0). A
negative number is then read through its one's complement (``translate`` of the hex digits:
``-1 - ~x``), so that no intermediate is larger than the result, and nothing is negated (Spark
rounds a negated 35+ digit decimal). Invalid base64, empty bytes, and values beyond DECIMAL(38)
give null, which the decoder reports as a bad value instead of failing the job.
"""

from __future__ import annotations

from decimal import Decimal

from replay.spark import Column, F, T

MAX_PRECISION = 38
UNSCALED_TYPE = T.DecimalType(MAX_PRECISION, 0)
_CHUNK_TYPE = T.DecimalType(20, 0)
_TWO_TO_64 = Decimal(2**64)
_SIGN_PADDING = r"^(?:00)+(?=[0-7])|^(?:FF)+(?=[89A-F])"
_HEX = "0123456789ABCDEF"


def _unsigned(hex_text: Column) -> Column:
    """A non-negative hex number of at most 32 digits as DECIMAL(38,0) (null beyond that)."""
    digits = F.length(hex_text)
    low = F.conv(F.right(hex_text, F.lit(16)), 16, 10).cast(_CHUNK_TYPE)
    high = F.conv(F.left(hex_text, digits - 16), 16, 10).cast(_CHUNK_TYPE)
    combined = F.try_add(F.try_multiply(high, F.lit(_TWO_TO_64).cast(_CHUNK_TYPE)), low)
    return (
        F.when(digits <= 16, low.cast(UNSCALED_TYPE))
        .when(digits <= 32, combined.cast(UNSCALED_TYPE))
        .otherwise(F.lit(None).cast(UNSCALED_TYPE))
    )


def _signed_word(raw_hex: Column) -> Column:
    """Two's-complement hex text of 1-16 digits as a BIGINT: sign-extended to 16 digits, read
    by ``conv`` into a signed base (a fifth of the general path's cost; most values fit)."""
    negative = F.substring(raw_hex, 1, 1) >= F.lit("8")
    extended = F.when(negative, F.lpad(raw_hex, 16, "F")).otherwise(F.lpad(raw_hex, 16, "0"))
    return F.conv(extended, 16, -10).cast("bigint")


def unscaled_from_base64(text: Column) -> Column:
    """The signed unscaled integer of base64 two's-complement bytes, as DECIMAL(38,0)."""
    raw_hex = F.hex(F.try_to_binary(text, F.lit("base64")))
    digits = F.length(raw_hex)
    word = F.when(digits > 0, _signed_word(raw_hex).cast(UNSCALED_TYPE))
    return F.when(digits <= 16, word).otherwise(_wide_unscaled(raw_hex))


def _wide_unscaled(raw_hex: Column) -> Column:
    """``unscaled_from_base64`` of more than 8 bytes (sign padding allowed)."""
    padded = F.substring(raw_hex, 1, 2).isin("00", "FF")  # rare: the regex only then
    hex_text = F.when(padded, F.regexp_replace(raw_hex, _SIGN_PADDING, "")).otherwise(raw_hex)
    negative = F.substring(hex_text, 1, 1) >= F.lit("8")
    magnitude = _unsigned(
        F.when(negative, F.translate(hex_text, _HEX, _HEX[::-1])).otherwise(hex_text)
    )
    # -(magnitude + 1), subtracting: Spark negates wide decimals with 34-digit rounding.
    value = F.when(negative, F.try_subtract(F.lit(Decimal(-1)), magnitude)).otherwise(magnitude)
    return F.when(F.length(hex_text) > 0, value.cast(UNSCALED_TYPE))


def decimal_type(scale: int, precision: int | None) -> T.DecimalType:
    """The Spark type of a Connect decimal: DECIMAL(min(precision, 38), scale).

    Raises ``ValueError`` for a scale Spark cannot hold (negative, or over 38).
    """
    if not 0 <= scale <= MAX_PRECISION:
        raise ValueError(f"decimal scale {scale} is outside Spark's 0..{MAX_PRECISION}")
    wanted = MAX_PRECISION if precision is None else min(precision, MAX_PRECISION)
    return T.DecimalType(max(wanted, scale, 1), scale)


def scaled(unscaled: Column, scale: Column | int, target: T.DataType) -> Column:
    """``unscaled * 10**-scale`` exactly, as ``target`` (null when it does not fit)."""
    exponent = F.lit(-scale) if isinstance(scale, int) else -scale
    text = F.concat(unscaled.cast("string"), F.lit("E"), exponent.cast("string"))
    return text.try_cast(target)


def decimal_from_base64(text: Column, target: T.DecimalType) -> Column:
    """A base64 Connect ``Decimal`` of scale ``target.scale`` as ``target``."""
    return scaled(unscaled_from_base64(text), target.scale, target)


def plain_decimal_text(unscaled: Column, scale: Column) -> Column:
    """``unscaled * 10**-scale`` as plain decimal text (``format(Decimal, "f")``: no exponent)."""
    digits = F.regexp_replace(unscaled.cast("string"), "^-", "")
    sign = F.when(unscaled < 0, F.lit("-")).otherwise(F.lit(""))
    padded = F.lpad(digits, F.greatest(F.length(digits), scale + 1), "0")
    length = F.length(padded)
    fractional = F.concat(F.left(padded, length - scale), F.lit("."), F.right(padded, scale))
    whole = F.concat(digits, F.repeat(F.lit("0"), -scale))
    return F.concat(sign, F.when(scale > 0, fractional).otherwise(whole))


def variable_scale_text(value: Column) -> Column:
    """An ``io.debezium.data.VariableScaleDecimal`` struct ``{scale, value}`` as plain text."""
    return plain_decimal_text(unscaled_from_base64(value["value"]), value["scale"])
