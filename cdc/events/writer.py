"""Serialising this product's own change events as Debezium JSON (JsonConverter layout).

With ``schemas_enable`` a value is ``{"schema": <Envelope schema>, "payload": <envelope>}``, the
schema text being built once per table; without, it is the bare envelope, and readers decode it
with the same ``TableSpec``. Reading what this writes gives back an equal event.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from cdc import json_bytes
from cdc.errors import ChangeEventError
from cdc.events import temporal
from cdc.events.columns import Column, ColumnKind, TableSpec
from cdc.events.decimal_codec import (
    decimal_to_base64,
    decimal_to_bytes,
    encode_base64,
    unscaled_at,
)
from cdc.events.envelope import ChangeEvent, Op
from cdc.events.json_text import dumps
from cdc.events.schema_builder import (
    REPLICATOR_SOURCE_FIELDS,
    envelope_schema,
    key_schema,
)
from cdc.events.source import ReplicatorSource
from cdc.events.unavailable import PLACEHOLDER_TEXT, UNAVAILABLE
from cdc.events.value_modes import encode_binary, temporal_encoding

Encoder = Callable[[Any], Any]
"""Turns one non-null Python column value into its JSON value; raises ``ValueError``."""

SOURCE_NAMES = tuple(field["field"] for field in REPLICATOR_SOURCE_FIELDS)
"""The ``ReplicatorSource`` fields, in the order they are written."""


def _int_encoder(bits: int) -> Encoder:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1)

    def encode(value: Any) -> int:
        if type(value) is not int or not low <= value < high:
            raise ValueError(f"expected an int{bits}, got {value!r}")
        return value

    return encode


def _float(value: Any) -> float | str:
    if type(value) is bool or not isinstance(value, float | int):
        raise ValueError(f"expected a float, got {value!r}")
    number = float(value)
    if math.isfinite(number):
        return number
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def _checked(kind: type | tuple[type, ...], convert: Callable[[Any], Any]) -> Encoder:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    expected = " or ".join(k.__name__ for k in kinds)

    def encode(value: Any) -> Any:
        if not isinstance(value, kind) or (bool not in kinds and type(value) is bool):
            raise ValueError(f"expected {expected}, got {type(value).__name__} {value!r}")
        return convert(value)

    return encode


def _text(value: str) -> str:
    if value == PLACEHOLDER_TEXT:
        raise ValueError("the unavailable-value placeholder text cannot be written as data")
    return value


def _date(value: date) -> int:
    if isinstance(value, datetime):
        raise ValueError(f"expected a date, got a datetime {value!r}")
    return temporal.days_from_date(value)


def _naive(convert: Callable[[Any], int]) -> Callable[[Any], int]:
    def encode(value: datetime | time) -> int:
        if value.tzinfo is not None:
            raise ValueError(f"expected a naive value, got {value!r}")
        return convert(value)

    return encode


def _in_units(column: Column, to_micros: Callable[[Any], int]) -> Callable[[Any], int]:
    """Microseconds to the unit of the column's ``time.precision.mode`` and precision; a value
    finer than that unit is refused, as a decimal with too many digits is."""
    encoding = temporal_encoding(column.type.value, column.time_precision_mode, column.precision)
    per_unit, per_micro = encoding.micros_per_unit, encoding.units_per_micro
    if per_unit == per_micro == 1:
        return to_micros

    def encode(value: Any) -> int:
        micros = to_micros(value)
        if micros % per_unit:
            raise ValueError(f"{value!r} is finer than the column's {encoding.logical} "
                             "(milliseconds)")  # fmt: skip
        return micros // per_unit * per_micro

    return encode


def _decimal_encoder(column: Column) -> Encoder:
    scale = column.scale or 0
    mode = column.decimal_handling_mode
    if mode != "precise":

        def exact(value: Decimal | int) -> Decimal:
            number = Decimal(value)
            if unscaled_at(number, scale) is None:
                raise ValueError(f"{value} does not fit scale {scale} exactly")
            return number

        as_json = (lambda d: format(d, "f")) if mode == "string" else float
        return _checked((Decimal, int), lambda v: as_json(exact(v)))
    checked = _checked((Decimal, int), lambda v: encode_base64(decimal_to_bytes(Decimal(v), scale)))

    def encode(value: Any) -> Any:
        if type(value) is Decimal:  # the common value in one call; others are checked
            return decimal_to_base64(value, scale)
        return checked(value)

    return encode


def encoder_for(column: Column) -> Encoder:
    """The encoder of one declared column, in its value modes."""
    kind = column.type
    if kind is ColumnKind.DECIMAL:
        return _decimal_encoder(column)
    if kind is ColumnKind.TIMESTAMP:
        return _checked(datetime, _naive(_in_units(column, temporal.micros_from_datetime)))
    if kind is ColumnKind.TIME:
        return _checked(time, _naive(_in_units(column, temporal.micros_from_time)))
    if kind is ColumnKind.BYTES:
        mode = column.binary_handling_mode
        return _checked((bytes, bytearray, memoryview), lambda v: encode_binary(bytes(v), mode))
    return _ENCODERS[kind]


def _string(value: Any) -> Any:
    if type(value) is str and value != PLACEHOLDER_TEXT:
        return value
    return _CHECKED_STRING(value)


_CHECKED_STRING = _checked(str, _text)


_ENCODERS: Mapping[ColumnKind, Encoder] = {
    ColumnKind.INT32: _int_encoder(32),
    ColumnKind.INT64: _int_encoder(64),
    ColumnKind.FLOAT64: _float,
    ColumnKind.BOOLEAN: _checked(bool, lambda v: v),
    ColumnKind.STRING: _string,
    ColumnKind.DATE: _checked(date, _date),
    ColumnKind.TIMESTAMP_TZ: _checked(datetime, temporal.zoned_text),
    ColumnKind.JSON: dumps,
    ColumnKind.UUID: _checked(uuid.UUID, str),
}


class EventWriter:
    """Writes the change events of one state table (``ReplicatorSource`` events) as JSON bytes."""

    def __init__(self, table: TableSpec, *, schemas_enable: bool = True) -> None:
        self.table = table
        self.schemas_enable = schemas_enable
        self._columns = tuple((c.name, encoder_for(c), c.optional) for c in table.columns)
        self._key_columns = tuple((c.name, encoder_for(c), False) for c in table.key_columns)
        self._names = frozenset(c.name for c in table.columns)
        self.value_head = ('{"schema":' + dumps(envelope_schema(table)) + ',"payload":').encode()
        """What a value with its schema starts with (then the payload, then ``}``)."""
        self._key_head = ('{"schema":' + dumps(key_schema(table)) + ',"payload":').encode()

    def value(self, event: ChangeEvent) -> bytes:
        """The record value of ``event``; raises ``ChangeEventError`` naming a bad field."""
        source = event.source
        if not isinstance(source, ReplicatorSource) or source.model_extra:
            raise ChangeEventError("our events carry exactly a ReplicatorSource", field="source")
        if event.op is Op.MESSAGE or event.message is not None or event.model_extra:
            raise ChangeEventError("our events carry no logical messages or extra fields")
        transaction = event.transaction
        if transaction is not None and transaction.model_extra:
            raise ChangeEventError("undeclared transaction fields", field="transaction")
        return self.value_of(
            event.op,
            event.before,
            event.after,
            {name: getattr(source, name) for name in SOURCE_NAMES},
            ts_ms=event.ts_ms,
            ts_us=event.ts_us,
            ts_ns=event.ts_ns,
            transaction=None if transaction is None else transaction.model_dump(),
        )

    def value_of(
        self,
        op: Op,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        source: Mapping[str, Any],
        *,
        ts_ms: int | None,
        ts_us: int | None = None,
        ts_ns: int | None = None,
        transaction: Mapping[str, Any] | None = None,
    ) -> bytes:
        """The record value of a change given by its parts, without building a ``ChangeEvent``
        (the processor's hot path); rows are checked against the declared columns all the same.
        ``source`` holds the ``ReplicatorSource`` fields by name (written as given when it is a
        dict of exactly ``SOURCE_NAMES`` in that order, as ``ChangelogConnector`` makes it)."""
        if type(source) is not dict or tuple(source) != SOURCE_NAMES:
            source = {name: source.get(name) for name in SOURCE_NAMES}
        payload = {
            "before": None if before is None else self._row(before, "before"),
            "after": None if after is None else self._row(after, "after"),
            "source": source,
            "op": op.value,
            "ts_ms": ts_ms,
            "ts_us": ts_us,
            "ts_ns": ts_ns,
            "transaction": transaction if type(transaction) is dict or transaction is None
            else dict(transaction),
        }  # fmt: skip
        return self._wrap(self.value_head, payload)

    def key(self, row: Mapping[str, Any]) -> bytes:
        """The record key of a row (its key columns); the tombstone after a delete has this key
        and a null value."""
        payload = self._encode(self._key_columns, row, "key")
        return self._wrap(self._key_head, payload)

    def _wrap(self, head: bytes, payload: dict[str, Any]) -> bytes:
        body = json_bytes.dumps(payload)
        return b"".join((head, body, b"}")) if self.schemas_enable else body

    def _row(self, row: Mapping[str, Any], where: str) -> dict[str, Any]:
        if not self._names.issuperset(row):
            undeclared = sorted(row.keys() - self._names)
            raise ChangeEventError(f"undeclared columns {undeclared}", field=where)
        return self._encode(self._columns, row, where)

    @staticmethod
    def _encode(
        columns: tuple[tuple[str, Encoder, bool], ...], row: Mapping[str, Any], where: str
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, encode, optional in columns:
            value = row.get(name)
            if value is None:
                if not optional:
                    raise ChangeEventError(
                        "required column is null or missing", field=f"{where}.{name}"
                    )
                out[name] = None
            elif value is UNAVAILABLE:
                raise ChangeEventError(
                    "UNAVAILABLE is never written as data", field=f"{where}.{name}"
                )
            else:
                try:
                    out[name] = encode(value)
                except ValueError as exc:
                    raise ChangeEventError(str(exc), field=f"{where}.{name}") from None
        return out
