"""Published MySQL and SQL Server records decode to their documented values."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal

from cdc.events import (
    MySqlSource,
    Op,
    RecordKey,
    SchemaChangeEvent,
    SqlServerSource,
    Tombstone,
    parse_value,
)
from tests.cdc.events.conftest import change_event

Published = Callable[[str], bytes]


def test_sqlserver_base64_decimals_and_millisecond_timestamp(published: Published) -> None:
    event = change_event(published("sqlserver_1x_delete_decimal_base64_with_schema.json"))
    assert event.op is Op.DELETE and event.after is None and event.before is not None
    assert str(event.before["sal"]) == "200000.0000"
    assert str(event.before["comm"]) == "10.0000"
    assert event.before["hiredate"] == datetime(2019, 7, 9, 0, 0)  # 1562630400000 ms, UTC wall
    assert event.row == event.before
    source = event.source
    assert isinstance(source, SqlServerSource)
    assert (source.change_lsn, source.commit_lsn, source.event_serial_no) == (
        "0000003a:00002f50:0002",
        "0000003a:00002f50:0005",
        1,
    )
    assert source.schema_name == "dbo" and source.table == "emp"


def test_sqlserver_delete_with_its_key_and_the_tombstone_after_it(published: Published) -> None:
    key = published("sqlserver_1x_delete_key_with_schema.json")
    event = change_event(published("sqlserver_1x_delete_decimal_base64_with_schema.json"), key=key)
    assert event.key == RecordKey(columns={"empno": 11}, schema_name="redislabs.dbo.emp.Key")
    tombstone = parse_value(None, key=key, topic="redislabs.dbo.emp", partition=0, offset=8)
    assert isinstance(tombstone, Tombstone)
    assert tombstone.key is not None and tombstone.key.columns == {"empno": 11}


def test_mysql_delete_then_tombstone_with_the_same_key(published: Published) -> None:
    key = published("mysql_2x_delete_key_with_schema.json")
    event = change_event(published("mysql_2x_delete_value_with_schema.json"), key=key)
    assert event.key is not None and event.key.columns == {"id": 1004}
    assert event.before is not None and event.before["first_name"] == "Anne"
    assert event.source.ts_us == event.source.ts_ms * 1000  # type: ignore[operator]
    assert event.transaction is None and event.source.sequence is None
    tombstone = parse_value(None, key=key)
    assert tombstone == Tombstone(key=event.key)


def test_flink_cdc_numeric_decimals_keep_every_digit(published: Published) -> None:
    after = change_event(
        published("mysql_flinkcdc_alltypes_numeric_decimals_with_schema.json")
    ).after
    assert after is not None
    assert str(after["_fixed"]) == "123456789876543212345678987654321.110"
    assert after["_fixed"] == Decimal("123456789876543212345678987654321.110")
    assert str(after["_big_decimal"]) == "2222222222222222300000001111.1234567890"
    assert str(after["pt"]) == "1.1"
    assert str(after["_numeric"]) == "12345.110"  # rescaled to the column's scale 3
    assert after["_decimal"] == Decimal(11111) and after["_serial"] == Decimal(40000000000)
    assert after["_float"] == 1.5 and type(after["_float"]) is float


def test_flink_cdc_temporal_and_other_logical_types(published: Published) -> None:
    after = change_event(
        published("mysql_flinkcdc_alltypes_numeric_decimals_with_schema.json")
    ).after
    assert after is not None
    assert after["_date"] == date(2023, 3, 23)
    assert after["_datetime"] == datetime(2023, 3, 23, 14, 30, 5)
    assert after["_datetime3"] == datetime(2023, 3, 23, 14, 30, 5, 123000)
    assert after["_datetime6"] == datetime(2023, 3, 23, 14, 30, 5, 123456)
    assert after["_timestamp"] == datetime(2023, 3, 23, 22, 0, 10, 123456, tzinfo=UTC)
    assert after["_time"] == time(10, 13, 23)
    assert after["_year"] == 2023 and after["_enum"] == "value1" and after["_set"] == "a,b"
    assert after["_json"] == {"a": "b"}
    assert after["_bit"] == bytes.fromhex("c707000000000000")
    assert after["_point"]["x"] == 1.0 and after["_point"]["srid"] is None
    assert after["_point"]["wkb"].startswith(b"\x01\x01\x00\x00\x00")


def test_mysql_snapshot_last_in_data_collection_date(published: Published) -> None:
    event = change_event(published("mysql_2x_snapshot_last_in_data_collection_with_schema.json"))
    assert event.op is Op.READ and event.after is not None
    assert event.after["order_date"] == date(2016, 2, 21)  # Date 16852
    assert event.source.snapshot == "last_in_data_collection" and event.source.is_snapshot
    assert event.position().order == (3, 824, 0)


def test_legacy_snapshot_as_create(published: Published) -> None:
    event = change_event(published("mysql_1x_flink_tutorial_snapshot_with_schema.json"))
    assert event.op is Op.CREATE and event.source.is_snapshot
    assert event.after is not None and event.after["weight"] == 3.140000104904175


def test_mysql_streaming_update_source(published: Published) -> None:
    event = change_event(published("mysql_3x_update_schemaless.json"))
    source = event.source
    assert isinstance(source, MySqlSource)
    assert (source.file, source.pos, source.row, source.thread) == (
        "mysql-bin.000003",
        1041,
        0,
        102,
    )
    assert event.ts_ns == 1731327659957757335
    snapshot = change_event(published("mysql_3x_snapshot_read_schemaless.json"))
    assert snapshot.position() < event.position()


def test_truncate_rendered_by_avro_unions(published: Published) -> None:
    event = change_event(published("mysql_2x_truncate_avro_json_rendering.json"))
    assert event.op is Op.TRUNCATE and event.before is None and event.after is None
    assert event.ts_ms == 1665304468970
    assert (event.source.snapshot, event.source.table) == ("false", "dbz5236")
    assert event.position().order == (35, 125109, 0)


def test_schema_change_event(published: Published) -> None:
    event = parse_value(published("mysql_schema_change_event_with_schema.json"))
    assert isinstance(event, SchemaChangeEvent)
    assert (event.database_name, event.schema_name) == ("inventory", None)
    assert event.ddl is not None and event.ddl.startswith("CREATE TABLE `geom`")
    assert event.table_changes == ()
    assert event.source.is_snapshot
