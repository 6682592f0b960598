"""Debezium's ``time.precision.mode`` and ``binary.handling.mode`` (and the decimal modes) on
declared columns: the Connect schema Debezium would write, our writer encoding in the mode, the
reader decoding by it (schemas on and off), and a value that does not fit being an error naming
the field, never a silent null."""

from __future__ import annotations

import json
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pytest

from cdc.errors import ChangeEventError, UsageError
from cdc.events import ChangeEvent, EventWriter, Op, ReplicatorSource
from cdc.events.columns import Column, ColumnKind, TableSpec
from cdc.events.declarations import declared_table
from cdc.events.reader import ChangeEventReader
from cdc.events.schema_builder import column_schema
from cdc.events.value_modes import ENCODED_BYTES, decode_binary, encode_binary

TOPIC = "shop.public.media"


def _table(time_mode: str, binary_mode: str, decimal_mode: str = "precise") -> TableSpec:
    return declared_table(TOPIC, {
        "key": ["id"],
        "time.precision.mode": time_mode,
        "binary.handling.mode": binary_mode,
        "decimal.handling.mode": decimal_mode,
        "columns": {
            "id": "int32", "day": "date", "t3": {"type": "time", "precision": 3}, "t6": "time",
            "t9": {"type": "time", "precision": 9}, "ts0": {"type": "timestamp", "precision": 0},
            "ts6": "timestamp", "ts9": {"type": "timestamp", "precision": 9}, "blob": "bytes",
            "price": {"type": "decimal", "scale": 2}, "note": "string",
        },
    })  # fmt: skip


def _logical(table: TableSpec) -> dict[str, tuple[str, str | None]]:
    fields = (column_schema(column) for column in table.columns)
    return {f["field"]: (f["type"], f.get("name")) for f in fields}


def test_time_precision_modes_give_debeziums_connect_types() -> None:
    adaptive = _logical(_table("adaptive", "bytes"))
    assert adaptive["day"] == ("int32", "io.debezium.time.Date")
    assert adaptive["t3"] == ("int32", "io.debezium.time.Time")
    assert adaptive["t6"] == ("int64", "io.debezium.time.MicroTime")
    assert adaptive["t9"] == ("int64", "io.debezium.time.NanoTime")
    assert adaptive["ts0"] == ("int64", "io.debezium.time.Timestamp")
    assert adaptive["ts6"] == ("int64", "io.debezium.time.MicroTimestamp")
    assert adaptive["ts9"] == ("int64", "io.debezium.time.NanoTimestamp")
    micro = _logical(_table("adaptive_time_microseconds", "bytes"))
    assert micro["t3"] == micro["t9"] == ("int64", "io.debezium.time.MicroTime")
    assert micro["ts0"] == ("int64", "io.debezium.time.Timestamp")
    connect = _logical(_table("connect", "bytes"))
    assert connect["day"] == ("int32", "org.apache.kafka.connect.data.Date")
    assert connect["t6"] == ("int32", "org.apache.kafka.connect.data.Time")
    assert connect["ts9"] == ("int64", "org.apache.kafka.connect.data.Timestamp")
    assert adaptive["blob"] == ("bytes", None)
    assert _logical(_table("adaptive", "hex"))["blob"] == ("string", ENCODED_BYTES)


def _row(**values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": 1, "day": date(2024, 2, 29), "t3": time(23, 59, 58, 123000),
        "t6": time(7, 8, 9, 123456), "t9": time(0, 0, 0, 1), "ts0": datetime(1969, 12, 31, 23),
        "ts6": datetime(2024, 1, 2, 3, 4, 5, 678901), "ts9": datetime(2038, 1, 19, 3, 14, 8, 5),
        "blob": bytes(range(256)) + b"\xfb\xff", "price": Decimal("-12.50"), "note": "x",
    }  # fmt: skip
    return {**row, **values}


def _event(row: dict[str, Any]) -> ChangeEvent:
    source = ReplicatorSource(
        connector="replicator", table="media", processor_id="p", input_topic="in",
        input_partition=0, input_offset_start=1, input_offset_end=2, commit_seq=1,
    )  # fmt: skip
    return ChangeEvent(before=None, after=row, source=source, op=Op.CREATE, ts_ms=1)


def _modes() -> list[tuple[str, str, str]]:
    return [("adaptive", "bytes", "precise"), ("adaptive", "hex", "string"),
            ("adaptive_time_microseconds", "base64", "double"),
            ("connect", "base64-url-safe", "string")]  # fmt: skip


@pytest.mark.parametrize("schemas", [True, False])
@pytest.mark.parametrize(("time_mode", "binary_mode", "decimal_mode"), _modes())
def test_each_mode_round_trips_through_writer_and_reader(
    time_mode: str, binary_mode: str, decimal_mode: str, schemas: bool
) -> None:
    table = _table(time_mode, binary_mode, decimal_mode)
    row = _row()
    if time_mode == "connect":  # milliseconds only
        row = _row(t6=time(7, 8, 9, 123000), t9=time(0, 0, 1), ts6=datetime(2024, 1, 2, 3, 4, 5))
        row["ts9"] = datetime(2038, 1, 19, 3, 14, 8, 5000)
    written = EventWriter(table, schemas_enable=schemas).value(_event(row))
    payload = json.loads(written)["payload" if schemas else "after"]
    if schemas:
        payload = payload["after"]
    assert isinstance(payload["blob"], str)
    if binary_mode == "hex":
        assert payload["blob"] == row["blob"].hex()
    reader = ChangeEventReader(None if schemas else table)
    event: Any = reader.parse_value(written)
    assert dict(event.after) == row


def test_a_value_finer_than_the_columns_unit_is_refused_by_the_writer() -> None:
    writer = EventWriter(_table("connect", "bytes"), schemas_enable=False)
    with pytest.raises(ChangeEventError, match=r"finer.*field after\.t6"):
        writer.value(_event(_row(t6=time(7, 8, 9, 123456))))


def _bare(after: dict[str, Any]) -> bytes:
    source = {"version": "3.6.3.Final", "connector": "postgresql", "name": "shop", "ts_ms": 1,
              "snapshot": "false", "db": "db", "schema": "public", "table": "media",
              "txId": 7, "lsn": 70}  # fmt: skip
    return json.dumps({"before": None, "after": after, "source": source, "op": "c"}).encode()


@pytest.mark.parametrize(
    ("binary_mode", "text", "expected"),
    [
        ("hex", "00ff10", b"\x00\xff\x10"),
        ("hex", "00FF10", b"\x00\xff\x10"),  # either case
        ("base64", "AP8Q", b"\x00\xff\x10"),
        ("base64-url-safe", "-_8=", b"\xfb\xff"),
        ("bytes", "+/8=", b"\xfb\xff"),
    ],
)
def test_debezium_binary_texts_decode(binary_mode: str, text: str, expected: bytes) -> None:
    reader = ChangeEventReader(_table("adaptive", binary_mode))
    event: Any = reader.parse_value(_bare({"id": 1, "blob": text}))
    assert event.after["blob"] == expected
    assert decode_binary(encode_binary(expected, binary_mode), binary_mode) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("binary_mode", "text"),
    [("hex", "abc"), ("hex", "zz"), ("hex", 12), ("base64", "not base64!"),
     ("base64-url-safe", "a$b="), ("bytes", "AP8")],
)  # fmt: skip
def test_a_binary_value_not_in_its_mode_is_an_error_naming_the_field(
    binary_mode: str, text: Any
) -> None:
    reader = ChangeEventReader(_table("adaptive", binary_mode))
    with pytest.raises(ChangeEventError, match=r"field after\.blob") as caught:
        reader.parse_value(_bare({"id": 1, "blob": text}), topic=TOPIC, partition=1, offset=4)
    assert f"topic {TOPIC}, partition 1, offset 4" in str(caught.value)


@pytest.mark.parametrize(
    ("time_mode", "field", "value", "expected"),
    [
        ("adaptive", "t3", 86_399_123, time(23, 59, 59, 123000)),  # milliseconds
        ("adaptive", "t6", 1_000_001, time(0, 0, 1, 1)),  # microseconds
        ("adaptive", "t9", 1_000_001_999, time(0, 0, 1, 1)),  # nanoseconds, floored
        ("adaptive_time_microseconds", "t3", 1_000_001, time(0, 0, 1, 1)),
        ("connect", "t6", 1_001, time(0, 0, 1, 1000)),
        ("connect", "ts6", -1, datetime(1969, 12, 31, 23, 59, 59, 999000)),
        ("adaptive", "ts0", 86_400_000, datetime(1970, 1, 2)),
    ],
)
def test_debezium_temporal_values_decode_by_their_mode(
    time_mode: str, field: str, value: int, expected: Any
) -> None:
    reader = ChangeEventReader(_table(time_mode, "bytes"))
    event: Any = reader.parse_value(_bare({"id": 1, field: value}))
    assert event.after[field] == expected


def test_a_temporal_value_not_in_its_mode_is_an_error_naming_the_field() -> None:
    reader = ChangeEventReader(_table("connect", "bytes"))
    with pytest.raises(ChangeEventError, match=r"field after\.t6"):
        reader.parse_value(_bare({"id": 1, "t6": "07:08:09"}), topic=TOPIC, partition=0, offset=1)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"time.precision.mode": "micro", "columns": {"id": "int32"}}, "time.precision.mode"),
        ({"binary.handling.mode": "b64", "columns": {"id": "int32"}}, "binary.handling.mode"),
        ({"columns": {"n": {"type": "string", "time.precision.mode": "connect"}}}, "'n' is a"),
        ({"columns": {"n": {"type": "int32", "binary.handling.mode": "hex"}}}, "'n' is a"),
        ({"columns": {"n": {"type": "int32", "precision": 3}}}, "precision is for"),
        ({"columns": {"t": {"type": "time", "precision": 12}}}, "0..9"),
    ],
)
def test_a_bad_mode_declaration_names_topic_and_setting(spec: dict[str, Any], named: str) -> None:
    with pytest.raises(UsageError, match=f"topic {TOPIC}") as caught:
        declared_table(TOPIC, spec)
    assert named in str(caught.value)


def test_topic_modes_apply_only_to_the_columns_they_are_for() -> None:
    table = _table("connect", "hex", "string")
    by_name = {column.name: column for column in table.columns}
    assert by_name["t3"].time_precision_mode == "connect"
    assert by_name["blob"].binary_handling_mode == "hex"
    assert by_name["price"].decimal_handling_mode == "string"
    assert (by_name["note"].time_precision_mode, by_name["note"].binary_handling_mode) == (
        "adaptive",
        "bytes",
    )
    in_python = Column(name="blob", type=ColumnKind.BYTES, binary_handling_mode="hex")
    assert in_python == by_name["blob"]  # the same objects from Python
