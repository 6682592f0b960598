"""Logical types and unavailable-value placeholders decode to the Python values they stand for."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from cdc.errors import ChangeEventError
from cdc.events import UNAVAILABLE, ChangeEvent, fill_unavailable, parse_value
from cdc.events.json_text import dumps
from cdc.events.unavailable import PLACEHOLDER_BASE64, PLACEHOLDER_HSTORE, PLACEHOLDER_TEXT

SOURCE = {"version": "2.7.0", "connector": "postgresql", "name": "pg", "ts_ms": 1, "lsn": 10}


def column(kind: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """A Connect field schema named ``v``."""
    schema: dict[str, Any] = {"type": kind, "optional": True, "field": "v", **extra}
    if name is not None:
        schema["name"] = name
    return schema


def record(fields: list[dict[str, Any]], after: dict[str, Any]) -> str:
    """A create event with a schema whose ``after`` struct has ``fields``."""
    row = {"type": "struct", "fields": fields, "optional": True, "name": "pg.t.Value"}
    schema = {
        "type": "struct",
        "name": "pg.t.Envelope",
        "optional": False,
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"type": "string", "optional": False, "field": "op"},
        ],
    }
    payload = {"before": None, "after": after, "source": SOURCE, "op": "c"}
    return dumps({"schema": schema, "payload": payload})


def decode(schema: dict[str, Any], value: Any) -> Any:
    """The decoded value of one column ``v`` with ``schema`` and JSON value ``value``."""
    event = parse_value(record([schema], {"v": value}))
    assert isinstance(event, ChangeEvent) and event.after is not None
    return event.after["v"]


DECIMAL = "org.apache.kafka.connect.data.Decimal"


@pytest.mark.parametrize(
    ("value", "scale", "expected"),
    [
        ("dzWUAA==", "4", "200000.0000"),
        ("AYag", "4", "10.0000"),
        ("/w==", "2", "-0.01"),
        ("AA==", "0", "0"),
        (12345, "2", "12345.00"),
        (Decimal("1.5"), "3", "1.500"),
        (Decimal("1.2345"), "2", "1.2345"),  # more digits than the scale: kept, never rounded
    ],
)
def test_connect_decimal(value: Any, scale: str, expected: str) -> None:
    parameters = {"scale": scale, "connect.decimal.precision": "40"}
    assert str(decode(column("bytes", DECIMAL, parameters=parameters), value)) == expected


def test_decimal_number_text_is_parsed_without_floats() -> None:
    text = record([column("bytes", DECIMAL, parameters={"scale": "3"})], {"v": 0})
    text = text.replace('"v":0', '"v":123456789876543212345678987654321.110')
    event = parse_value(text)
    assert isinstance(event, ChangeEvent) and event.after is not None
    assert str(event.after["v"]) == "123456789876543212345678987654321.110"


def test_decimal_handling_mode_string_stays_text() -> None:
    assert decode(column("string"), "50.50") == "50.50"


def test_variable_scale_decimal() -> None:
    schema = column("struct", "io.debezium.data.VariableScaleDecimal")
    assert str(decode(schema, {"scale": 2, "value": "AYag"})) == "1000.00"


TIME = "io.debezium.time."
DATA = "io.debezium.data."
CONNECT = "org.apache.kafka.connect.data."
AN_ID = "123e4567-e89b-12d3-a456-426614174000"
PLUS_TWO = timezone(timedelta(hours=2))
AT_MICRO = datetime(2019, 7, 9, 2, 28, 57, 123456)


@pytest.mark.parametrize(
    ("kind", "name", "value", "expected"),
    [
        ("int32", TIME + "Date", 16852, date(2016, 2, 21)),
        ("int32", TIME + "Date", -1, date(1969, 12, 31)),
        ("int32", CONNECT + "Date", 17424, date(2017, 9, 15)),
        ("int32", TIME + "Time", 3_723_004, time(1, 2, 3, 4000)),
        ("int32", CONNECT + "Time", 1000, time(0, 0, 1)),
        ("int64", TIME + "MicroTime", 28_800_000_001, time(8, 0, 0, 1)),
        ("int64", TIME + "MicroTime", 86_400_000_000, timedelta(hours=24)),
        ("int64", TIME + "MicroTime", -3_600_000_000, timedelta(hours=-1)),
        ("int64", TIME + "NanoTime", 1_999, time(0, 0, 0, 1)),
        ("string", TIME + "ZonedTime", "08:30:00+02:00", time(8, 30, tzinfo=PLUS_TWO)),
        ("int64", TIME + "Timestamp", 1562630400000, datetime(2019, 7, 9)),
        ("int64", CONNECT + "Timestamp", -1, datetime(1969, 12, 31, 23, 59, 59, 999000)),
        ("int64", TIME + "MicroTimestamp", 1562639337123456, AT_MICRO),
        ("int64", TIME + "NanoTimestamp", 1562639337123456789, AT_MICRO),  # floored
        ("string", DATA + "Uuid", AN_ID, UUID(AN_ID)),
        ("string", DATA + "Json", '{"a": [1, 2.50, null]}', {"a": [1, Decimal("2.50"), None]}),
        ("int32", TIME + "Year", 2023, 2023),
        ("string", DATA + "Enum", "value1", "value1"),
        ("string", DATA + "EnumSet", "a,b", "a,b"),
        ("bytes", DATA + "Bits", "xwc=", b"\xc7\x07"),
    ],
)  # fmt: skip
def test_logical_types(kind: str, name: str, value: Any, expected: Any) -> None:
    assert decode(column(kind, name), value) == expected


def test_zoned_timestamp_keeps_its_offset() -> None:
    value = decode(column("string", TIME + "ZonedTimestamp"), "2019-07-09T03:28:10+02:00")
    assert value.utcoffset() == timedelta(hours=2)
    assert value == datetime(2019, 7, 9, 1, 28, 10, tzinfo=UTC)


def test_physical_types() -> None:
    assert decode(column("double"), "NaN") != decode(column("double"), "NaN")  # NaN
    assert decode(column("float"), -10) == -10.0
    assert decode(column("boolean"), False) is False
    assert decode(column("bytes"), "Sm9obg==") == b"John"
    assert decode(column("int64"), 2**63 - 1) == 2**63 - 1


def test_maps_as_objects_and_as_pairs() -> None:
    schema = column("map", keys={"type": "string"}, values={"type": "int32", "optional": True})
    assert decode(schema, {"a": 1, "b": None}) == {"a": 1, "b": None}
    int_keys = column("map", keys={"type": "int32"}, values={"type": "string"})
    assert decode(int_keys, [[1, "x"], [2, "y"]]) == {1: "x", 2: "y"}


def test_null_takes_the_schema_default() -> None:
    assert decode(column("string", default="dflt"), None) == "dflt"


@pytest.mark.parametrize(
    ("schema", "placeholder"),
    [
        (column("string"), PLACEHOLDER_TEXT),
        (column("bytes"), PLACEHOLDER_BASE64),
        (column("bytes", DECIMAL, parameters={"scale": "2"}), PLACEHOLDER_BASE64),
        (column("string", "io.debezium.data.Json"), PLACEHOLDER_TEXT),
        (column("array", items={"type": "string", "optional": True}), [PLACEHOLDER_TEXT]),
        (column("array", items={"type": "int32"}), list(PLACEHOLDER_TEXT.encode())),
        (column("map", keys={"type": "string"}, values={"type": "string"}), PLACEHOLDER_HSTORE),
    ],
)  # fmt: skip
def test_every_placeholder_form_is_unavailable(schema: dict[str, Any], placeholder: Any) -> None:
    assert decode(schema, placeholder) is UNAVAILABLE


def test_schemaless_placeholder_and_keeping_the_previous_value() -> None:
    payload = {
        "before": None,
        "after": {"id": 1, "bio": PLACEHOLDER_TEXT, "photo": PLACEHOLDER_BASE64, "n": 2},
        "source": SOURCE,
        "op": "u",
    }
    event = parse_value(json.dumps(payload))
    assert isinstance(event, ChangeEvent) and event.after is not None
    assert event.unavailable_columns == {"bio", "photo"}
    previous = {"id": 1, "bio": "long text", "photo": b"png", "n": 1}
    assert fill_unavailable(event.after, previous) == {
        "id": 1,
        "bio": "long text",
        "photo": b"png",
        "n": 2,
    }
    with pytest.raises(ChangeEventError) as error:
        fill_unavailable(event.after, {"id": 1, "photo": b"png"})
    assert error.value.field == "bio"
