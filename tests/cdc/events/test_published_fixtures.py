"""Every published Debezium record parses; PostgreSQL ones decode to their documented values."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import pytest

from cdc.events import (
    Op,
    PostgresSource,
    RecordKey,
    TransactionEvent,
    parse_key,
    parse_value,
)
from tests.cdc.events.conftest import change_event, published_names

Published = Callable[[str], bytes]


def test_all_36_published_records_are_present() -> None:
    assert len(published_names()) == 36


@pytest.mark.parametrize("name", published_names())
def test_every_published_record_parses(published: Published, name: str) -> None:
    if "_key_" in name:
        key = parse_key(published(name))
        assert isinstance(key, RecordKey) and key.columns
    else:
        assert parse_value(published(name), topic="t", partition=0, offset=1) is not None


def test_postgres_create_fields(published: Published) -> None:
    event = change_event(published("pg_1x_create_with_schema.json"))
    assert event.op is Op.CREATE and event.before is None
    assert event.after == {
        "id": 110,
        "name": "jacket",
        "description": "water resistent white wind breaker",
        "weight": 0.2,
    }
    assert type(event.after["weight"]) is float
    assert event.ts_ms == 1596010946870
    source = event.source
    assert isinstance(source, PostgresSource)
    assert (source.lsn, source.tx_id, source.xmin, source.snapshot) == (
        34132560,
        604,
        None,
        "false",
    )
    assert not source.is_snapshot
    assert event.position().order == (34132560, 34132560)


def test_postgres_update_keeps_trailing_space(published: Published) -> None:
    event = change_event(published("pg_1x_update_replica_full_with_schema.json"))
    assert event.before is not None and event.after is not None
    assert event.before["description"] == event.after["description"] == "Big 2-wheel scooter "
    assert (event.before["weight"], event.after["weight"]) == (5.18, 5.17)


def test_postgres_delete_with_neither_image(published: Published) -> None:
    event = change_event(published("pg_1x_delete_before_null_schemaless.json"))
    assert event.op is Op.DELETE and event.before is None and event.after is None
    assert event.row is None
    assert isinstance(event.source, PostgresSource) and event.source.tx_id == 608


def test_schemaless_numbers_ints_stay_ints_others_are_decimals(published: Published) -> None:
    event = change_event(published("pg_1x_update_schemaless.json"))
    assert event.after == {
        "id": 106,
        "name": "hammer",
        "description": "18oz carpenter hammer",
        "weight": Decimal("1.0"),
    }
    assert type(event.after["id"]) is int


def test_postgres_sequence_and_snapshot_last(published: Published) -> None:
    event = change_event(published("pg_1x_snapshot_last_schemaless.json"))
    source = event.source
    assert isinstance(source, PostgresSource)
    assert source.snapshot == "last" and source.is_snapshot
    assert source.sequence == '[null,"23911624"]' and source.last_commit_lsn is None
    assert event.position().order == (23911624, 23911624)
    later = change_event(published("pg_1x_update_schemaless_sequence.json"))
    assert later.position() > event.position()


def test_postgres_transaction_block(published: Published) -> None:
    event = change_event(published("pg_2x_create_with_transaction_block_schema_null.json"))
    assert event.transaction is not None
    assert (event.transaction.id, event.transaction.total_order) == ("35392:3963199336", 1)
    assert event.transaction.data_collection_order == 1
    assert isinstance(event.source, PostgresSource)
    assert event.source.last_commit_lsn == 3963198512
    assert event.position().order == (3963198512, 3963199336)
    assert event.after is not None and event.after["price"] == "50.50"  # schemaless text stays


def test_transaction_begin_and_end(published: Published) -> None:
    begin = parse_value(published("pg_txn_begin_schema_null.json"))
    end = parse_value(published("pg_txn_end_schema_null.json"))
    assert isinstance(begin, TransactionEvent) and isinstance(end, TransactionEvent)
    assert begin.is_begin and (begin.id, begin.event_count, begin.data_collections) == (
        "35352:3962948040",
        None,
        None,
    )
    assert not end.is_begin and end.id == "35352:3962950064" and end.event_count == 11
    assert end.data_collections is not None
    counts = [(c.data_collection, c.event_count) for c in end.data_collections]
    assert counts == [("public.orders_tx", 5), ("public.person", 6)]
    assert begin.ts_ms == end.ts_ms == 1704269323180
    gtid = parse_value(published("mysql_txn_end_gtid_schema_null.json"))
    assert isinstance(gtid, TransactionEvent)
    assert gtid.id == "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"


def test_postgres_arrays_of_logical_types(published: Published) -> None:
    event = change_event(published("pg_3x_create_arrays_temporal_with_schema.json"))
    after = event.after
    assert after is not None
    assert after["c_integer"] == [10, 20]
    assert after["c_uuid"] == [
        UUID("123e4567-e89b-12d3-a456-426614174000"),
        UUID("987e6543-e21b-45d3-b456-426614174111"),
    ]
    assert after["c_json"] == [{"name": "John"}, {"name": "Jane"}]
    assert after["c_date"] == [date(2025, 1, 30)]
    assert after["c_timestamp0"] == [datetime(2025, 1, 30, 8, 0)]
    assert after["c_timestamp3"] == [datetime(2025, 1, 30, 8, 0, 0, 123000)]
    assert after["c_timestamp6"] == [datetime(2025, 1, 30, 8, 0, 0, 123456)]
    assert after["c_timestamptz"] == [datetime(2025, 1, 30, 8, tzinfo=UTC)] * 2
    assert after["c_time"] == [time(8, tzinfo=UTC), time(8, 30, tzinfo=UTC)]
    assert after["c_time_whtz"] == [time(8, 0), time(14, 45, 30)]
    assert after["c_binary"] == [b"John", b"Jane"]
    assert (event.ts_us, event.ts_ns) == (1748996736451134, 1748996736451134199)
    assert event.position().order == (22096576, 22096576)


def test_unwrapped_flat_row(published: Published) -> None:
    event = change_event(published("pg_unwrap_smt_with_schema.json"))
    assert event.unwrapped and event.op is Op.READ
    assert event.after == {
        "id": 10003,
        "order_date": date(2016, 2, 19),
        "purchaser": 1002,
        "quantity": 2,
        "product_id": 106,
    }
    source = event.source
    assert isinstance(source, PostgresSource)
    assert (source.lsn, source.table, source.ts_ms) == (33832960, "orders", 1596309876678)
    assert event.position().order == (33832960, 33832960)


def test_unwrapped_flat_row_with_temporal_and_json_types(published: Published) -> None:
    event = change_event(published("pg_unwrap_smt_temporal_json_types_with_schema.json"))
    after = event.after
    assert after is not None and not any(name.startswith("__") for name in after)
    assert after["c_date"] == date(2017, 9, 15)  # Date 17424
    assert after["c_json"] == {"jfield": 111} and after["c_jsonb"] == {"jfield": 211}
    assert after["c_timestamp0"] == datetime(2019, 7, 9, 2, 28, 57)
    assert after["c_timestamp2"] == datetime(2019, 7, 9, 2, 28, 57, 120000)
    assert after["c_timestamp6"] == datetime(2019, 7, 9, 2, 28, 57, 123456)
    zone = timezone(timedelta(0))
    assert after["c_timestamptz"] == datetime(2019, 7, 9, 1, 28, 10, 123456, tzinfo=zone)
    source = event.source
    assert isinstance(source, PostgresSource)
    assert (source.lsn, source.tx_id, source.db) == (36192976, 764, "postgres")
