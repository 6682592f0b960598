"""Published Debezium records (PostgreSQL, MySQL, SQL Server, with schema) decode on the JVM to
the values the Python parser gives, and the Python fallback path agrees with the native one."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from cdc.events import ChangeEvent, parse_value
from replay.decode.changes import decode_native
from replay.decode.codec import UnsupportedSchema
from replay.decode.fallback import change_values, decode_python
from replay.decode.schema import TopicSchema
from replay.sinks.protocol import OP, POS
from replay.spark import T
from tests.replay.decode.conftest import as_records, by_offset, json_equal, published, raw_frame

pytestmark = pytest.mark.integration

# One topic per group: (value file, key file) in offset order; None value: a tombstone.
TOPICS: dict[str, list[tuple[str | None, str | None]]] = {
    "pg.products": [
        ("pg_1x_snapshot_read_with_schema.json", None),
        ("pg_1x_create_with_schema.json", None),
        ("pg_1x_update_replica_full_with_schema.json", None),
        ("pg_1x_delete_replica_full_with_schema.json", None),
    ],
    "pg.customer": [("pg_1x_snapshot_read_with_schema_float_types.json", None)],
    "pg.arrays": [("pg_3x_create_arrays_temporal_with_schema.json", None)],
    "mysql.customers": [
        ("mysql_1x_snapshot_read_with_schema.json", None),
        ("mysql_1x_create_with_schema.json", None),
        ("mysql_1x_update_with_schema.json", None),
        ("mysql_1x_delete_with_schema.json", None),
    ],
    "mysql2.customers": [
        ("mysql_2x_delete_value_with_schema.json", "mysql_2x_delete_key_with_schema.json"),
        (None, "mysql_2x_delete_key_with_schema.json"),
    ],
    "mysql2.orders": [
        (
            "mysql_2x_snapshot_last_in_data_collection_with_schema.json",
            "mysql_2x_snapshot_key_with_schema.json",
        )
    ],
    "mysql.products": [("mysql_1x_flink_tutorial_snapshot_with_schema.json", None)],
    "mysql.alltypes": [("mysql_flinkcdc_alltypes_numeric_decimals_with_schema.json", None)],
    "sqlserver.emp": [
        (
            "sqlserver_1x_delete_decimal_base64_with_schema.json",
            "sqlserver_1x_delete_key_with_schema.json",
        )
    ],
}


def _records(topic: str) -> list[tuple[str, int, int, bytes | None, bytes | None, int]]:
    pairs = [(None if k is None else published(k), None if v is None else published(v))
             for v, k in TOPICS[topic]]  # fmt: skip
    return as_records(topic, pairs)


@functools.cache
def _schema(topic: str) -> TopicSchema:
    """The topic's schema, one object per topic (its decoder expressions are built once)."""
    newest = [r for r in _records(topic) if r[4] is not None][-1]
    return TopicSchema.from_record(newest[4] or b"", newest[3])


def _instants(value: Any) -> Any:
    """Datetimes as UTC instants (Spark collects TIMESTAMP as naive local time)."""
    if isinstance(value, list):
        return [_instants(v) for v in value]
    return value.astimezone(UTC) if isinstance(value, datetime) else value


def _same(kind: T.DataType, actual: Any, expected: Any) -> bool:
    if _instants(actual) == _instants(expected):
        return True
    try:  # JSON columns: the source's text (native) or its compact re-serialisation (Python)
        return isinstance(kind, T.StringType | T.ArrayType) and json_equal(actual, expected)
    except ValueError:
        return False


def _expected(topic: str, schema: TopicSchema) -> list[list[Any]]:
    rows = []
    for _, _, offset, key, value, _ in _records(topic):
        if value is not None:
            event = parse_value(value, key=key, topic=topic, partition=0, offset=offset)
            assert isinstance(event, ChangeEvent)
            values, unavailable, error = change_values(schema, event)
            assert error is None and not unavailable
            rows.append(values)
    return rows


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_native_equals_python_parser_and_fallback(spark: Any, topic: str) -> None:
    schema = _schema(topic)
    frame = raw_frame(spark, _records(topic))
    native = by_offset(decode_native(frame, schema).all.collect())
    fallback = by_offset(decode_python(frame, schema).all.collect())
    assert all(r["__error"] is None for r in native + fallback)
    expected = _expected(topic, schema)
    assert len(native) == len(fallback) == len(expected)
    types = [c.codec.spark for c in schema.columns]
    for got, other, want in zip(native, fallback, expected, strict=True):
        for index, kind in enumerate(types):
            assert _same(kind, got[index], want[index]), (schema.columns[index].name, got)
            assert _same(kind, got[index], other[index]), (schema.columns[index].name, other)
        assert (got[OP], got[POS], got["__txn"]) == (other[OP], other[POS], other["__txn"])


def test_values_of_the_logical_types(spark: Any) -> None:
    alltypes = decode_native(
        raw_frame(spark, _records("mysql.alltypes")), _schema("mysql.alltypes")
    )
    row = alltypes.good.first()
    assert row is not None
    assert row["_fixed"] == Decimal("123456789876543212345678987654321.110")
    assert row["_big_decimal"] == Decimal("2222222222222222300000001111.1234567890")
    assert row["_bigint_unsigned"] == Decimal("20000000000")
    assert (row["_date"], row["_datetime6"]) == (
        date(2023, 3, 23),
        datetime(2023, 3, 23, 14, 30, 5, 123456),
    )
    assert row["_timestamp"].astimezone(UTC) == datetime(2023, 3, 23, 22, 0, 10, 123456, tzinfo=UTC)
    assert (row["_time"], row["_year"], row["_set"]) == (36_803_000_000, 2023, "a,b")
    assert row["_point"]["x"] == 1.0 and isinstance(row["_bin"], bytes)
    sqlserver = decode_native(raw_frame(spark, _records("sqlserver.emp")), _schema("sqlserver.emp"))
    emp = sqlserver.good.first()
    assert emp is not None
    assert (emp["sal"], emp["comm"], emp[OP]) == (Decimal("200000.0000"), Decimal("10.0000"), "d")
    assert emp["hiredate"] == datetime(2019, 7, 9)
    kinds = dict((f.name, f.dataType) for f in sqlserver.good.schema.fields)
    assert kinds["sal"] == T.DecimalType(19, 4) and kinds["hiredate"] == T.TimestampNTZType()


def test_flat_rows_decode_on_the_python_path_only(spark: Any) -> None:
    value = published("pg_unwrap_smt_temporal_json_types_with_schema.json")
    schema = TopicSchema.from_record(value)
    assert not schema.native
    frame = raw_frame(spark, as_records("flat", [(None, value)]))
    with pytest.raises(UnsupportedSchema):
        decode_native(frame, schema)
    rows = decode_python(frame, schema).good.collect()
    assert (
        len(rows) == 1 and rows[0][OP] == "u" and rows[0]["__source"]["connector"] == "postgresql"
    )
