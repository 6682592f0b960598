"""Kafka Connect decimals as Spark SQL expressions, evaluated on the JVM (no Python UDF).

A Connect ``Decimal`` travels as base64 text of the big-endian two's-complement unscaled value.
Up to 8 bytes (most values) its hex text is sign-extended to 16 digits and read by ``conv`` as a
signed 64-bit number. Longer, its hex text, stripped of redundant sign-extension bytes, is read
as a signed high word and an unsigned low word of 16 digits each (``conv``), combined exactly in
DECIMAL(38,0) so that no intermediate is larger than the result and nothing is negated (Spark
rounds a negated 35+ digit decimal). Invalid base64, empty bytes, and values beyond DECIMAL(38)
give null, which the decoder reports as a bad value instead of failing the job. The conversion
comes in steps (``UNSCALED_STEPS``) the decoder runs as projections of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from replay.spark import Column, F, T

MAX_PRECISION = 38
UNSCALED_TYPE = T.DecimalType(MAX_PRECISION, 0)
_CHUNK_TYPE = T.DecimalType(20, 0)
_TWO_TO_64 = Decimal(2**64)
_SIGN_PADDING = r"^(?:00)+(?=[0-7])|^(?:FF)+(?=[89A-F])"


Step = Callable[[Sequence[Column]], Column]
"""A step of a staged conversion: from ``[raw, step 1's value, ...]`` the next value."""


def _hex_text(parts: Sequence[Column]) -> Column:
    """The base64 text's bytes as hex digits (empty for no bytes, null for invalid base64)."""
    return F.hex(F.try_to_binary(parts[0], F.lit("base64")))


def _wide_text(parts: Sequence[Column]) -> Column:
    """Hex digits of more than 8 bytes without their sign-extension bytes; null for 8 or fewer."""
    raw_hex = parts[1]
    padded = F.substring(raw_hex, 1, 2).isin("00", "FF")  # rare: the regex only then
    stripped = F.when(padded, F.regexp_replace(raw_hex, _SIGN_PADDING, "")).otherwise(raw_hex)
    return F.when(F.length(raw_hex) > 16, stripped)


def _signed_word(raw_hex: Column) -> Column:
    """Two's-complement hex text of 1-16 digits as a BIGINT: sign-extended to 16 digits, read
    by ``conv`` into a signed base (a fifth of the general path's cost; most values fit)."""
    negative = F.substring(raw_hex, 1, 1) >= F.lit("8")
    extended = F.when(negative, F.lpad(raw_hex, 16, "F")).otherwise(F.lpad(raw_hex, 16, "0"))
    return F.conv(extended, 16, -10).cast("bigint")


def _high_word(parts: Sequence[Column]) -> Column:
    """The signed value of the wide text's digits before its last 16 (17-32 digits), or of all
    of them (at most 16, left after the sign-extension bytes); null for more than 32."""
    wide = parts[2]
    digits = F.length(wide)
    high = F.when(digits > 16, F.left(wide, digits - 16))
    return F.when(digits <= 32, _signed_word(F.coalesce(high, wide)))


def _unscaled(parts: Sequence[Column]) -> Column:
    """``high * 2**64 + low`` exactly as DECIMAL(38,0) (the low 16 digits unsigned), null
    beyond it. A negative ``high`` is combined as ``(high + 1) * 2**64 - (2**64 - low)``: no
    intermediate is then larger than the result (Spark's wide decimals would overflow or round)."""
    raw_hex, wide, high = parts[1], parts[2], parts[3]
    digits = F.length(raw_hex)
    narrow = F.when(digits > 0, _signed_word(raw_hex).cast(UNSCALED_TYPE))
    low = F.conv(F.right(wide, F.lit(16)), 16, 10).cast(_CHUNK_TYPE)
    two_to_64 = F.lit(_TWO_TO_64).cast(_CHUNK_TYPE)
    positive = F.try_add(F.try_multiply(high.cast(_CHUNK_TYPE), two_to_64), low)
    below = F.try_multiply((high + 1).cast(_CHUNK_TYPE), two_to_64)
    negative = F.try_subtract(below, F.try_subtract(two_to_64, low))
    combined = F.when(high < 0, negative).otherwise(positive)
    wide_value = F.when(F.length(wide) > 16, combined).otherwise(high)
    return (
        F.when(digits <= 16, narrow)
        .when(F.length(wide) > 0, wide_value.cast(UNSCALED_TYPE))
        .otherwise(F.lit(None).cast(UNSCALED_TYPE))
    )


UNSCALED_STEPS: tuple[Step, ...] = (_hex_text, _wide_text, _high_word, _unscaled)
"""``unscaled_from_base64`` of the raw value in steps; the decoder runs each in a projection of
its own (``decode.columns.step_columns``), so no step's expression is copied into the next:
inline, the conversion is a tree of thousands of nodes, which a cold JVM plans and compiles for
seconds. The last step's value is the unscaled DECIMAL(38,0)."""
VARIABLE_SCALE_STEPS: tuple[Step, ...] = (
    lambda parts: _hex_text([parts[0]["value"]]), *UNSCALED_STEPS[1:],
)  # fmt: skip
"""``UNSCALED_STEPS`` of a ``VariableScaleDecimal`` struct's ``value``."""


def staged(raw: Column, steps: Sequence[Step], finish: Step) -> Column:
    """``finish`` of the ``steps`` applied in turn to ``raw``, as one expression."""
    values = [raw]
    for step in steps:
        values.append(step(values))
    return finish(values)


def unscaled_from_base64(text: Column) -> Column:
    """The signed unscaled integer of base64 two's-complement bytes, as DECIMAL(38,0)."""
    return staged(text, UNSCALED_STEPS, lambda parts: parts[-1])


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
    return staged(text, UNSCALED_STEPS, decimal_finish(target))


def decimal_finish(target: T.DecimalType) -> Step:
    """``decimal_from_base64`` from the values of ``UNSCALED_STEPS``."""
    return lambda parts: scaled(parts[-1], target.scale, target)


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
    return staged(value, VARIABLE_SCALE_STEPS, variable_scale_finish)


def variable_scale_finish(parts: Sequence[Column]) -> Column:
    """``variable_scale_text`` from the values of ``VARIABLE_SCALE_STEPS``."""
    return plain_decimal_text(parts[-1], parts[0]["scale"])
