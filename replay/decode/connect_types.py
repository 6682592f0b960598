"""Connect field schemas compiled to Spark: the type ``from_json`` reads, the decoded type, and
the JVM-side conversion between them (plus the same conversion for the Python fallback path).

Decoded types: int8/16/32/64 -> TINYINT/SMALLINT/INT/BIGINT; float and double -> DOUBLE (the
value the JSON text shows, as the Python parser reads it);
bytes -> BINARY; ``Decimal`` -> DECIMAL(min(precision, 38), scale); ``VariableScaleDecimal`` ->
STRING (plain decimal text, any scale); ``Date`` -> DATE; ``Timestamp``/``MicroTimestamp``/
``NanoTimestamp`` -> TIMESTAMP_NTZ (Debezium's wall-clock values; nanoseconds floored);
``ZonedTimestamp`` -> TIMESTAMP (UTC instant); ``Time``/``MicroTime``/``NanoTime`` -> BIGINT
microseconds since midnight (MySQL TIME is a duration: negative or over 24 h stays exact);
``ZonedTime`` -> STRING (ISO text); ``Json`` -> STRING (JSON text); ``Uuid`` -> STRING; arrays,
maps with text keys and structs (geometries among them) element-wise. Other logical types decode
as their physical type. A value that does not convert (bad base64, a decimal beyond 38 digits, a
timestamp text without a zone) becomes null and is reported by the decoder as a bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from cdc.events import temporal
from cdc.events.decimal_codec import unscaled_at
from cdc.events.json_text import dumps
from cdc.events.logical_types import decimal_scale
from cdc.events.value_modes import ENCODED_BYTES
from replay.decode.codec import Codec, Convert, ToPython, UnsupportedSchema, same_column
from replay.decode.decimals import (
    UNSCALED_STEPS,
    VARIABLE_SCALE_STEPS,
    decimal_finish,
    decimal_type,
    variable_scale_finish,
)
from replay.spark import Column, F, T

_INTEGRAL: Mapping[str, T.DataType] = {
    "int8": T.ByteType(),
    "int16": T.ShortType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
}
_SIMPLE: Mapping[str, T.DataType] = {
    **_INTEGRAL,
    "float": T.DoubleType(),
    "float32": T.DoubleType(),
    "double": T.DoubleType(),
    "float64": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
}


def _floor_div(column: Column, divisor: int) -> Column:
    return F.call_function("div", column - F.pmod(column, F.lit(divisor)), F.lit(divisor))


def _timestamp(to_micros: Convert) -> Convert:
    def convert(raw: Column) -> Column:
        epoch = F.lit("1970-01-01 00:00:00").cast(T.TimestampNTZType())
        return epoch + F.expr("INTERVAL '0.000001' SECOND") * to_micros(raw)

    return convert


def _time_micros(value: time | timedelta) -> int:
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    return temporal.micros_from_time(value)


def _zoned_time_text(value: time) -> str:
    """Java's ``ISO_OFFSET_TIME`` form, as Debezium writes it: fraction without trailing zeros."""
    text = value.replace(tzinfo=None).isoformat(timespec="seconds")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    offset = value.utcoffset()
    return text + ("Z" if not offset else value.isoformat()[-6:])


def _aware(value: datetime) -> datetime:
    """The instant in UTC (raises ``OverflowError`` past year 1 or 9999, as Spark would later)."""
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _integral(bits: int) -> ToPython:
    """An integer of ``bits`` bits as it is; raises ``ValueError`` outside their range (Spark
    would take its low bits from a Python row: ``from_json`` rejects it)."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"{value} is not a {bits}-bit integer")
        return value

    return check


_IN_RANGE = {"int8": _integral(8), "int16": _integral(16), "int32": _integral(32),
             "int64": _integral(64)}  # fmt: skip
"""One checker per type: codecs built twice compare equal (decoder caches key on them)."""


def _decimal_to_python(target: T.DecimalType) -> ToPython:
    def convert(value: Decimal) -> Decimal:
        unscaled = unscaled_at(value, target.scale)
        if unscaled is None or abs(unscaled) >= 10**target.precision:
            raise ValueError(f"{value} does not fit DECIMAL({target.precision},{target.scale})")
        return value

    return convert


def _decimal(schema: Mapping[str, Any], numeric: bool) -> Codec:
    parameters = schema.get("parameters") or {}
    precision = parameters.get("connect.decimal.precision")
    try:
        target = decimal_type(decimal_scale(schema), None if precision is None else int(precision))
    except ValueError as exc:
        raise UnsupportedSchema(str(exc)) from None
    to_python = _decimal_to_python(target)
    if schema.get("type") == "string":  # decimal.handling.mode=string: exact text, scale checked
        wide = T.DecimalType(38, min(38 - (target.precision - target.scale), target.scale + 8))

        def exact(c: Column) -> Column:
            fitted = c.try_cast(target)
            return F.when(fitted.cast(wide) == c.try_cast(wide), fitted)

        return Codec(T.StringType(), target, exact, to_python, True, "string")
    if schema.get("type") == "double":  # decimal.handling.mode=double: rounded to the scale
        rounded: Convert = lambda c: F.round(c, target.scale).try_cast(target)  # noqa: E731
        return Codec(T.DoubleType(), target, rounded, to_python, True, "double")
    if numeric:  # decimal.format=NUMERIC: JSON numbers, read by from_json at full width
        raw: T.DataType = T.DecimalType(38, target.scale)
        return Codec(raw, target, lambda c: c.try_cast(target), to_python, True, "bytes")
    finish = decimal_finish(target)
    return Codec.in_steps(T.StringType(), target, UNSCALED_STEPS, finish, to_python, "bytes")


def _fixed_logical(name: str) -> Codec | None:
    long, text = T.LongType(), T.StringType()
    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return Codec(T.IntegerType(), T.DateType(), F.date_from_unix_date)
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return Codec(long, T.TimestampNTZType(), _timestamp(lambda ms: ms * 1000))
    if name == "io.debezium.time.MicroTimestamp":
        return Codec(long, T.TimestampNTZType(), _timestamp(same_column))
    if name == "io.debezium.time.NanoTimestamp":
        return Codec(long, T.TimestampNTZType(), _timestamp(lambda ns: _floor_div(ns, 1000)))
    if name == "io.debezium.time.ZonedTimestamp":
        return Codec(
            text, T.TimestampType(), lambda c: F.try_to_timestamp(c), _aware, True, "string"
        )
    if name in ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"):
        return Codec(long, long, lambda ms: ms * 1000, _time_micros)
    if name == "io.debezium.time.MicroTime":
        return Codec(long, long, same_column, _time_micros)
    if name == "io.debezium.time.NanoTime":
        return Codec(long, long, lambda ns: _floor_div(ns, 1000), _time_micros)
    if name == "io.debezium.time.ZonedTime":
        return Codec(text, text, to_python=_zoned_time_text, physical="string")
    if name == "io.debezium.data.Json":
        return Codec(text, text, to_python=dumps, physical="string")
    if name == "io.debezium.data.Uuid":
        return Codec(text, text, to_python=str, physical="string")
    if name == "io.debezium.data.VariableScaleDecimal":
        raw = T.StructType([T.StructField("scale", T.IntegerType()), T.StructField("value", text)])
        return Codec.in_steps(
            raw, text, VARIABLE_SCALE_STEPS, variable_scale_finish, lambda d: format(d, "f")
        )
    return None


def _base64(text: Column) -> Column:
    return F.try_to_binary(text, F.lit("base64"))


def _encoded_bytes(schema: Mapping[str, Any]) -> Codec:
    """``binary.handling.mode`` base64 / base64-url-safe / hex (the Python path's strictness:
    hex of even length only)."""
    mode = (schema.get("parameters") or {}).get("binary.handling.mode")
    if mode == "hex":
        convert: Convert = lambda c: F.when(  # noqa: E731
            F.length(c) % 2 == 0, F.try_to_binary(c, F.lit("hex"))
        )
    elif mode == "base64-url-safe":
        convert = lambda c: _base64(F.translate(c, "-_", "+/"))  # noqa: E731
    elif mode in ("base64", "bytes"):
        convert = _base64
    else:
        raise UnsupportedSchema(f"{ENCODED_BYTES} with an unknown binary.handling.mode {mode!r}")
    return Codec(T.StringType(), T.BinaryType(), convert, bytes, True, "string")


def compile_codec(schema: Mapping[str, Any], numeric_decimals: bool = False) -> Codec:
    """The codec of one Connect schema; raises ``UnsupportedSchema``."""
    kind, name = schema.get("type"), schema.get("name")
    if name == "org.apache.kafka.connect.data.Decimal":
        return _decimal(schema, numeric_decimals)
    if name == ENCODED_BYTES:
        return _encoded_bytes(schema)
    logical = _fixed_logical(name) if isinstance(name, str) else None
    if logical is not None:
        return logical
    if isinstance(kind, str) and kind in _INTEGRAL:
        return Codec(_INTEGRAL[kind], _INTEGRAL[kind], to_python=_IN_RANGE[kind], physical=kind)
    if isinstance(kind, str) and kind in _SIMPLE:
        return Codec(_SIMPLE[kind], _SIMPLE[kind], physical=kind)
    if kind == "bytes":
        return Codec(T.StringType(), T.BinaryType(), _base64, bytes, True, "bytes")
    if kind == "array":
        return _array(compile_codec(schema.get("items") or {}, numeric_decimals))
    if kind == "map":
        keys = compile_codec(schema.get("keys") or {}, numeric_decimals)
        if not isinstance(keys.raw, T.StringType) or keys.spark != keys.raw:
            raise UnsupportedSchema("a map with non-text keys (JSON pairs) is not read natively")
        return _map(compile_codec(schema.get("values") or {}, numeric_decimals))
    if kind == "struct":
        return compile_struct(schema, numeric_decimals)
    raise UnsupportedSchema(f"unknown Connect type {kind!r}")


def _array(item: Codec) -> Codec:
    def to_python(values: list[Any]) -> list[Any]:
        return [None if v is None else item.to_python(v) for v in values]

    convert: Convert = lambda c: F.transform(c, lambda x: item.convert(x))  # noqa: E731
    raw, spark = T.ArrayType(item.raw), T.ArrayType(item.spark)
    return Codec(raw, spark, convert, to_python, item.fallible, "array")


def _map(value: Codec) -> Codec:
    def to_python(entries: dict[str, Any]) -> dict[str, Any]:
        return {k: None if v is None else value.to_python(v) for k, v in entries.items()}

    convert: Convert = lambda c: F.transform_values(c, lambda _, v: value.convert(v))  # noqa: E731
    raw = T.MapType(T.StringType(), value.raw)
    spark = T.MapType(T.StringType(), value.spark)
    return Codec(raw, spark, convert, to_python, physical="map")


def compile_struct(schema: Mapping[str, Any], numeric_decimals: bool = False) -> Codec:
    """A struct schema (a nested struct column, e.g. a geometry) as one codec."""
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise UnsupportedSchema("struct schema without a fields list")
    names = [str(f.get("field")) for f in fields]
    codecs = [compile_codec(f, numeric_decimals) for f in fields]
    raw = T.StructType([T.StructField(n, c.raw) for n, c in zip(names, codecs, strict=True)])
    spark = T.StructType([T.StructField(n, c.spark) for n, c in zip(names, codecs, strict=True)])

    def convert(column: Column) -> Column:
        parts = [c.convert(column[n]).alias(n) for n, c in zip(names, codecs, strict=True)]
        return F.when(column.isNotNull(), F.struct(*parts))

    def to_python(value: Mapping[str, Any]) -> tuple[Any, ...]:
        pairs = zip(names, codecs, strict=True)
        return tuple(None if value.get(n) is None else c.to_python(value[n]) for n, c in pairs)

    return Codec(raw, spark, convert, to_python, physical="struct")
