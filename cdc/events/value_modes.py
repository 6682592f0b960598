"""Debezium's value modes: how a connector setting encodes a column's values in the JSON.

A topic written with schemas carries the encoding in its Connect schema; a schemaless topic's
declaration (``--schema FILE``) names the mode as Debezium names it, and the declared column is
given the Connect schema Debezium would have written for it:

- ``decimal.handling.mode``: ``precise`` (base64 of the unscaled bytes), ``string``, ``double``.
- ``time.precision.mode``: ``adaptive`` (the column's precision picks milli-, micro- or
  nanosecond units), ``adaptive_time_microseconds`` (as adaptive, but ``time`` always in
  microseconds), ``connect`` (Kafka Connect's ``Date``/``Time``/``Timestamp``, milliseconds).
- ``binary.handling.mode``: ``bytes`` (JsonConverter's base64), ``base64``, ``base64-url-safe``,
  ``hex`` (text; Debezium's schema says ``string``, ours names the mode, see ``ENCODED_BYTES``).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Literal

DecimalHandlingMode = Literal["precise", "string", "double"]
"""Debezium's ``decimal.handling.mode``: how a decimal travels in the JSON of a schemaless topic:
``precise`` base64 of the unscaled bytes (or a JSON number with ``decimal.format=NUMERIC``),
``string`` plain decimal text, ``double`` a JSON number (rounded to the scale when read)."""

TimePrecisionMode = Literal["adaptive", "adaptive_time_microseconds", "connect"]
"""Debezium's ``time.precision.mode`` for ``date``, ``time`` and ``timestamp`` columns (zoned
values are ISO text in every mode)."""

BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]
"""Debezium's ``binary.handling.mode`` for binary columns."""

DEFAULT_TIME_PRECISION = 6
"""Fractional-second digits of a ``time``/``timestamp`` column declared without a precision
(PostgreSQL's and MySQL's default for ``time(6)``/``timestamp(6)``)."""

ENCODED_BYTES = "cdc.replicator.EncodedBytes"
"""Logical name of a binary column carried as text (parameter ``binary.handling.mode``)."""


@dataclass(frozen=True)
class TemporalEncoding:
    """How a date, time or timestamp travels: Connect type, logical name, and the unit
    (``micros_per_unit`` > 1: milliseconds; < 1 is written as ``units_per_micro``)."""

    physical: str
    logical: str
    micros_per_unit: int = 1
    units_per_micro: int = 1


_MILLIS = 1000


def temporal_encoding(
    kind: str, mode: TimePrecisionMode, precision: int | None
) -> TemporalEncoding:
    """The encoding of a ``date``/``time``/``timestamp`` column (``kind``) in ``mode``, where
    ``precision`` is its fractional-second digits (adaptive modes only)."""
    digits = DEFAULT_TIME_PRECISION if precision is None else precision
    if kind == "date":
        name = (
            "org.apache.kafka.connect.data.Date" if mode == "connect" else "io.debezium.time.Date"
        )
        return TemporalEncoding("int32", name)
    if mode == "connect":
        if kind == "time":
            return TemporalEncoding("int32", "org.apache.kafka.connect.data.Time", _MILLIS)
        return TemporalEncoding("int64", "org.apache.kafka.connect.data.Timestamp", _MILLIS)
    if kind == "time" and mode == "adaptive_time_microseconds":
        return TemporalEncoding("int64", "io.debezium.time.MicroTime")
    stem = "Time" if kind == "time" else "Timestamp"
    if digits <= 3:
        return TemporalEncoding("int32" if kind == "time" else "int64",
                                f"io.debezium.time.{stem}", _MILLIS)  # fmt: skip
    if digits <= 6:
        return TemporalEncoding("int64", f"io.debezium.time.Micro{stem}")
    return TemporalEncoding("int64", f"io.debezium.time.Nano{stem}", units_per_micro=1000)


def encode_binary(data: bytes, mode: BinaryHandlingMode) -> str:
    """``data`` as the text ``mode`` writes (``bytes`` too: JsonConverter writes base64)."""
    if mode == "hex":
        return data.hex()
    if mode == "base64-url-safe":
        return base64.urlsafe_b64encode(data).decode("ascii")
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def decode_binary(text: str, mode: BinaryHandlingMode) -> bytes:
    """The bytes of ``text`` written in ``mode``; raises ``ValueError`` when it is not that."""
    if mode == "hex":
        return binascii.unhexlify(text)  # strict: even length, hex digits only, either case
    if mode == "base64-url-safe":
        return base64.b64decode(text, altchars=b"-_", validate=True)
    return binascii.a2b_base64(text, strict_mode=True)
