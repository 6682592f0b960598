"""Record layouts and event kinds beyond the published samples."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from cdc.events import (
    ChangeEventReader,
    Column,
    ColumnKind,
    MySqlSource,
    Op,
    PostgresSource,
    SchemaChangeEvent,
    TableSpec,
    Tombstone,
    parse_value,
)
from cdc.events.json_text import dumps, loads
from tests.cdc.events.conftest import change_event

Published = Callable[[str], bytes]
SOURCE = {"connector": "postgresql", "name": "pg", "ts_ms": 5, "lsn": 100, "txId": 7}
ORDERS = TableSpec(
    server="pg",
    table="public.orders",
    columns=(
        Column(name="id", type=ColumnKind.INT32, optional=False),
        Column(name="price", type=ColumnKind.DECIMAL, scale=2),
        Column(name="day", type=ColumnKind.DATE),
    ),
    key=("id",),
)


def test_same_record_in_every_layout(published: Published) -> None:
    text = published("pg_1x_create_with_schema.json").decode()
    record = loads(text)
    expected = change_event(text)
    payload_first = dumps({"payload": record["payload"], "schema": record["schema"]})
    spaced = text.replace('{"schema":', '{ "schema" :\n', 1).replace(
        ',"payload":', ' ,\t"payload" : '
    )
    for layout in (
        payload_first,
        spaced + "\n",
        memoryview(text.encode()),
        bytearray(text.encode()),
    ):
        assert change_event(layout) == expected
    bare = change_event(dumps(record["payload"]))
    assert bare.after == {**expected.after, "weight": Decimal("0.2")}  # type: ignore[dict-item]


def test_null_payload_is_a_tombstone() -> None:
    assert parse_value('{"schema": null, "payload": null}') == Tombstone()


def test_one_reader_keeps_several_schemas(published: Published) -> None:
    reader = ChangeEventReader()
    names = [
        "pg_1x_create_with_schema.json",
        "sqlserver_1x_delete_decimal_base64_with_schema.json",
        "mysql_2x_delete_value_with_schema.json",
    ]
    first = [reader.parse_value(published(name)) for name in names]
    assert [reader.parse_value(published(name)) for name in reversed(names)] == first[::-1]


def test_logical_decoding_message_with_schema() -> None:
    message = {
        "type": "struct",
        "optional": True,
        "field": "message",
        "name": "io.debezium.connector.postgresql.Message",
        "fields": [
            {"type": "string", "optional": False, "field": "prefix"},
            {"type": "bytes", "optional": True, "field": "content"},
        ],
    }
    schema = {
        "type": "struct",
        "name": "io.debezium.connector.postgresql.MessageValue",
        "fields": [{"type": "string", "optional": False, "field": "op"}, message],
    }
    payload = {
        "op": "m",
        "ts_ms": 1,
        "source": SOURCE,
        "message": {"prefix": "audit", "content": "aGk="},
    }
    event = change_event(dumps({"schema": schema, "payload": payload}))
    assert event.op is Op.MESSAGE and event.message is not None
    assert (event.message.prefix, event.message.content) == ("audit", b"hi")
    assert change_event(dumps(payload)).message.content == "aGk="  # type: ignore[union-attr]


def test_declared_table_decodes_schemaless_rows_and_keys() -> None:
    payload = {
        "before": None,
        "after": {"id": 1, "price": "E4g=", "day": 16852},
        "source": SOURCE,
        "op": "c",
    }
    event = change_event(dumps(payload), key=b'{"id": 1}', table=ORDERS)
    assert event.after == {"id": 1, "price": Decimal("50.00"), "day": date(2016, 2, 21)}
    assert event.key is not None and event.key.columns == {"id": 1}
    assert change_event(dumps(payload)).after == payload["after"]


def test_flat_rows_without_op_and_with_a_declared_table() -> None:
    deleted = {"id": 3, "price": "E4g=", "day": None, "__deleted": "true", "__lsn": 900}
    event = change_event(dumps(deleted), table=ORDERS)
    assert event.unwrapped and event.op is Op.DELETE and event.after is None
    assert event.before == {"id": 3, "price": Decimal("50.00"), "day": None}
    assert isinstance(event.source, PostgresSource) and event.position().order == (900, 900)
    upsert = change_event(dumps({"id": 4, "__deleted": False, "__source_connector": "mysql"}))
    assert upsert.op is Op.UPDATE and upsert.after == {"id": 4}
    assert isinstance(upsert.source, MySqlSource)


@pytest.mark.parametrize(
    ("snapshot", "text", "is_snapshot"),
    [
        (True, "true", True),
        (False, "false", False),
        ("incremental", "incremental", True),
        (None, None, False),
    ],
)
def test_snapshot_is_open_text(snapshot: Any, text: str | None, is_snapshot: bool) -> None:
    payload = {"op": "r", "after": {"id": 1}, "source": {**SOURCE, "snapshot": snapshot}}
    event = change_event(dumps(payload))
    assert (event.source.snapshot, event.source.is_snapshot) == (text, is_snapshot)


def test_unknown_source_fields_and_connectors_are_kept() -> None:
    source = {**SOURCE, "origin_ts": 3, "connector": "postgresql"}
    event = change_event(dumps({"op": "c", "after": {"id": 1}, "source": source, "new_field": [1]}))
    assert event.source.model_extra == {"origin_ts": 3}
    assert event.model_extra == {"new_field": [1]}
    oracle = change_event(
        dumps({"op": "c", "after": {"id": 1}, "source": {"connector": "oracle", "scn": "9"}})
    )
    assert oracle.source.model_extra == {"scn": "9"}


def test_schema_change_table_changes() -> None:
    table = {
        "primaryKeyColumnNames": ["id"],
        "columns": [{"name": "g", "position": 2}, {"name": "id", "position": 1}],
    }
    payload = {
        "source": {"connector": "mysql", "file": "mysql-bin.000003", "pos": 154},
        "databaseName": "inventory",
        "ddl": "ALTER TABLE geom ADD g geometry",
        "tableChanges": [{"type": "ALTER", "id": '"inventory"."geom"', "table": table}],
    }
    event = parse_value(dumps(payload))
    assert isinstance(event, SchemaChangeEvent)
    (change_,) = event.table_changes
    assert change_.type == "ALTER" and change_.primary_key_columns == ("id",)
    assert change_.column_names == ("id", "g")
