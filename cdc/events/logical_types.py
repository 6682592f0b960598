"""Decoders from JsonConverter values to Python values, by Connect type and logical type name.

Each decoder takes a non-null JSON value (as ``json_text.loads`` gives it) and returns the Python
value, raising ``FieldError`` when the value does not fit. Logical types not listed here
(``io.debezium.time.Year``, ``Enum``, ``EnumSet``, ``Bits``, ``Xml``, geometries, intervals)
decode by their physical Connect type: ``Bits`` gives ``bytes``, ``Year`` an ``int``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from cdc.events import temporal
from cdc.events.decimal_codec import decimal_from_bytes, decode_base64, rescale
from cdc.events.field_errors import FieldError, describe
from cdc.events.json_text import loads
from cdc.events.value_modes import ENCODED_BYTES, BinaryHandlingMode, decode_binary

Decoder = Callable[[Any], Any]
"""Decodes one non-null JSON value; raises ``FieldError``."""

_NON_FINITE = frozenset({"NaN", "Infinity", "-Infinity"})


def decode_int(value: Any) -> int:
    """Any Connect integer type (int8..int64)."""
    if type(value) is int:
        return value
    raise FieldError(f"expected an integer, got {describe(value)}")


def decode_float(value: Any) -> float:
    """Connect float/double; JSON numbers, and the texts Jackson writes for NaN and infinities."""
    kind = type(value)
    if kind is float or kind is Decimal or kind is int or (kind is str and value in _NON_FINITE):
        return float(value)
    raise FieldError(f"expected a number, got {describe(value)}")


def decode_bool(value: Any) -> bool:
    """Connect boolean."""
    if type(value) is bool:
        return value
    raise FieldError(f"expected true or false, got {describe(value)}")


def decode_string(value: Any) -> str:
    """Connect string."""
    if type(value) is str:
        return value
    raise FieldError(f"expected text, got {describe(value)}")


def decode_bytes(value: Any) -> bytes:
    """Connect bytes, which JsonConverter writes as base64 text."""
    try:
        return decode_base64(decode_string(value))
    except ValueError as exc:
        raise FieldError(f"invalid base64 ({exc}): {describe(value)}") from None


PHYSICAL_DECODERS: Mapping[str, Decoder] = {
    "int8": decode_int,
    "int16": decode_int,
    "int32": decode_int,
    "int64": decode_int,
    "float": decode_float,
    "double": decode_float,
    "float32": decode_float,
    "float64": decode_float,
    "boolean": decode_bool,
    "string": decode_string,
    "bytes": decode_bytes,
}


def _converting(check: Decoder, convert: Callable[[Any], Any], what: str) -> Decoder:
    def decode(value: Any) -> Any:
        raw = check(value)
        try:
            return convert(raw)
        except (ValueError, OverflowError, ArithmeticError) as exc:
            raise FieldError(f"invalid {what} {describe(value)}: {exc}") from None

    return decode


def decimal_scale(schema: Mapping[str, Any]) -> int:
    """The ``scale`` parameter of a ``Decimal`` schema; raises ``FieldError`` when absent."""
    parameters = schema.get("parameters")
    scale: Any = parameters.get("scale") if isinstance(parameters, Mapping) else None
    try:
        return int(scale)
    except (TypeError, ValueError):
        raise FieldError(f"decimal schema without an integer scale parameter: {scale!r}") from None


def _decimal(schema: Mapping[str, Any]) -> Decoder:
    scale = decimal_scale(schema)
    if schema.get("type") == "string":
        return _decimal_text(scale)
    if schema.get("type") == "double":
        return _decimal_double(scale)

    def decode(value: Any) -> Decimal:
        kind = type(value)
        if kind is str:
            try:
                return decimal_from_bytes(decode_base64(value), scale)
            except ValueError as exc:
                raise FieldError(f"invalid base64 decimal ({exc}): {describe(value)}") from None
        if kind is Decimal or kind is int:
            return rescale(Decimal(value), scale)  # decimal.format=NUMERIC
        raise FieldError(f"expected a decimal, got {describe(value)}")

    return decode


def _decimal_text(scale: int) -> Decoder:
    """``decimal.handling.mode=string``: plain decimal text with at most ``scale`` decimals (a
    JSON number is taken as its text, as Spark's JSON reader does)."""

    def decode(value: Any) -> Decimal:
        kind = type(value)
        if kind is not str and kind is not int and kind is not Decimal:
            raise FieldError(f"expected decimal text (decimal.handling.mode=string), got "
                             f"{describe(value)}")  # fmt: skip
        try:
            number = Decimal(value.strip() if kind is str else value)
        except ArithmeticError:
            raise FieldError(f"invalid decimal text: {describe(value)}") from None
        exact = rescale(number, scale)
        if not number.is_finite() or exact.as_tuple().exponent != -scale:
            raise FieldError(f"{describe(value)} does not fit scale {scale}")
        return exact

    return decode


def _decimal_double(scale: int) -> Decoder:
    """``decimal.handling.mode=double``: a JSON number, rounded half-even to ``scale``."""

    def decode(value: Any) -> Decimal:
        kind = type(value)
        if kind is not float and kind is not int and kind is not Decimal:
            raise FieldError(f"expected a number (decimal.handling.mode=double), got "
                             f"{describe(value)}")  # fmt: skip
        number = Decimal(str(value)) if kind is float else Decimal(value)
        try:
            return number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_EVEN)
        except ArithmeticError:
            raise FieldError(f"{describe(value)} is not a decimal of scale {scale}") from None

    return decode


def _variable_scale_decimal(value: Any) -> Decimal:
    if type(value) is not dict:
        raise FieldError(f"expected an object with scale and value, got {describe(value)}")
    try:
        scale = decode_int(value.get("scale"))
    except FieldError as exc:
        raise exc.within("scale") from None
    try:
        return decimal_from_bytes(decode_bytes(value.get("value")), scale)
    except FieldError as exc:
        raise exc.within("value") from None
    except ValueError as exc:
        raise FieldError(str(exc), "value") from None


def _encoded_bytes(schema: Mapping[str, Any]) -> Decoder:
    """``binary.handling.mode`` base64 / base64-url-safe / hex: bytes carried as text."""
    parameters = schema.get("parameters")
    mode: Any = parameters.get("binary.handling.mode") if isinstance(parameters, Mapping) else None
    if mode not in ("bytes", "base64", "base64-url-safe", "hex"):
        raise FieldError(f"{ENCODED_BYTES} schema with an unknown binary.handling.mode {mode!r}")
    known: BinaryHandlingMode = mode

    def decode(value: Any) -> bytes:
        try:
            return decode_binary(decode_string(value), known)
        except ValueError as exc:
            raise FieldError(f"invalid {known} bytes ({exc}): {describe(value)}") from None

    return decode


def _fixed(decoder: Decoder) -> Callable[[Mapping[str, Any]], Decoder]:
    return lambda _schema: decoder


_MILLIS_DATE = _converting(decode_int, temporal.date_from_days, "date")
_MILLIS_TIME = _converting(decode_int, lambda ms: temporal.time_from_micros(ms * 1000), "time")
_MILLIS_TIMESTAMP = _converting(
    decode_int, lambda ms: temporal.datetime_from_micros(ms * 1000), "timestamp"
)

LOGICAL_DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Decoder]] = {
    "org.apache.kafka.connect.data.Decimal": _decimal,
    "io.debezium.data.VariableScaleDecimal": _fixed(_variable_scale_decimal),
    "io.debezium.time.Date": _fixed(_MILLIS_DATE),
    "org.apache.kafka.connect.data.Date": _fixed(_MILLIS_DATE),
    "io.debezium.time.Time": _fixed(_MILLIS_TIME),
    "org.apache.kafka.connect.data.Time": _fixed(_MILLIS_TIME),
    "io.debezium.time.MicroTime": _fixed(
        _converting(decode_int, temporal.time_from_micros, "time")
    ),
    "io.debezium.time.NanoTime": _fixed(
        _converting(decode_int, lambda ns: temporal.time_from_micros(ns // 1000), "time")
    ),
    "io.debezium.time.ZonedTime": _fixed(
        _converting(decode_string, temporal.zoned_time, "zoned time")
    ),
    "io.debezium.time.Timestamp": _fixed(_MILLIS_TIMESTAMP),
    "org.apache.kafka.connect.data.Timestamp": _fixed(_MILLIS_TIMESTAMP),
    "io.debezium.time.MicroTimestamp": _fixed(
        _converting(decode_int, temporal.datetime_from_micros, "timestamp")
    ),
    "io.debezium.time.NanoTimestamp": _fixed(
        _converting(decode_int, lambda ns: temporal.datetime_from_micros(ns // 1000), "timestamp")
    ),
    "io.debezium.time.ZonedTimestamp": _fixed(
        _converting(decode_string, temporal.zoned_datetime, "zoned timestamp")
    ),
    "io.debezium.data.Json": _fixed(_converting(decode_string, loads, "JSON document")),
    "io.debezium.data.Uuid": _fixed(_converting(decode_string, uuid.UUID, "UUID")),
    ENCODED_BYTES: _encoded_bytes,
}
"""Decoder factories by logical name; a factory reads parameters (``scale``) from the schema."""
