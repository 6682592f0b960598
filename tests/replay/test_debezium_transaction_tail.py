"""A stream that ends inside a multi-table source transaction is never applied in part.

Debezium's PostgreSQL connector (transaction metadata on, 2 partitions per topic) captures a
workload that ends with one transaction over both tables. Its records are then copied, as they
are, to new topics in three steps, as a broker would show them while the connector is still
sending that transaction:

1. every record but the last transaction's ``entries`` events and its END;
2. its END arrives (``entries`` still missing);
3. its ``entries`` events arrive.

After steps 1 and 2 each replay to ``latest`` (both sinks, by the CLI) equals the database
*before* the transaction in both tables, although its ``accounts`` events are there; after step 3
the catch-up equals the database after it. ``--per-event`` applies what has arrived (the half
state: the control that shows the test can fail). A projection over ``accounts`` alone holds the
transaction until its END (its own topic's part is complete then).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime.postgres import LocalPostgres
from cdc.streams.kafka_stream import KafkaEventStream
from cdc.streams.protocol import StreamRecord
from replay.cli.main import main
from replay.projection.engine import ProjectionEngine
from replay.projection.versions import ProjectionVersions
from replay.sinks.registry import open_sink
from tests.cdc.runtime.pg_workload import ACCOUNTS, ENTRIES, TABLES
from tests.replay.debezium_source import (
    State,
    assert_rows_equal,
    captured_database,
    database_state,
    mirror_rows,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
SETTLE = ("--transaction-settle", "3600")
"""The copies get new timestamps step by step; a step on a loaded machine may take longer than
the default window, which would then count the held transaction as settled."""
ACTIVE = (
    "CREATE TABLE active_accounts AS SELECT active, count(*) AS n FROM accounts GROUP BY active"
)


@dataclass
class Captured:
    prefix: str
    before: State
    after: State
    txid: str
    """The PostgreSQL txid of the transaction cut at the tail."""


@pytest.fixture(scope="module")
def captured(
    postgres: LocalPostgres, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Captured]:
    options, conn, workload, capture = captured_database(
        postgres, kafka_bootstrap, tmp_path_factory.mktemp("tail-capture"), "tail",
        seed=20261125, accounts=10, entries=20, transaction_metadata=True, partitions=PARTITIONS,
    )  # fmt: skip
    try:
        capture.wait_caught_up()
        workload.run(transactions=30)
        before = database_state(conn)
        with conn.transaction():  # the transaction cut at the tail: both tables, many rows
            row = conn.execute("SELECT txid_current()").fetchone()
            txid = str(row[0] if row else "")
            for step in (workload._insert_account, workload._update_account) * 3:
                step()
            for step in (workload._insert_entry, workload._update_entry) * 4:
                step()
        after = database_state(conn)
        capture.wait_caught_up()
        yield Captured(options.topic_prefix, before, after, txid)
    finally:
        capture.stop()
        conn.close()


def _records(stream: KafkaEventStream, topic: str) -> list[StreamRecord]:
    out: list[StreamRecord] = []
    for partition in range(stream.partition_count(topic)):
        out += stream.read(topic, partition, stream.bounds(topic, partition).log_start)
    return out


def _txid(record: StreamRecord) -> str | None:
    if record.value is None:
        return None
    block = json.loads(record.value).get("payload", {}).get("transaction")
    return None if block is None else str(block["id"]).split(":")[0]


def _with_end(
    stream: KafkaEventStream, topic: str, txid: str
) -> tuple[list[StreamRecord], StreamRecord]:
    """The metadata records once the END of ``txid`` is among them (the capture may forward it
    a little after its data events), and that END."""
    deadline = time.monotonic() + 60
    while True:
        meta = _records(stream, topic)
        for r in meta:
            payload = json.loads(r.value or b"{}").get("payload", {})
            if payload.get("status") == "END" and str(payload.get("id")).split(":")[0] == txid:
                return meta, r
        assert time.monotonic() < deadline, f"no END of transaction {txid} in {topic}"
        time.sleep(0.5)


def _copy(stream: KafkaEventStream, records: list[tuple[str, StreamRecord]]) -> None:
    writer = stream.writer(f"tail-copy-{uuid.uuid4().hex[:8]}")
    try:
        writer.begin()
        for topic, r in records:
            writer.send(topic, r.key, r.value, partition=r.partition)
        writer.commit()
    finally:
        writer.close()


def _mirror(kafka: str, sink_url: str, spark: Any, prefix: str, *extra: str) -> State:
    pattern = prefix.replace("-", "\\-") + r"\.public\..*"
    argv = ["replay", "--stream", f"kafka://{kafka}", "--sink", sink_url, "--topics", pattern,
            *SETTLE]  # fmt: skip
    assert main([*argv, *extra]) == 0
    sink = open_sink(sink_url, spark)
    try:
        return {t: mirror_rows(sink, f"{t.split('.')[-1]}", t) for t in TABLES}
    finally:
        sink.close()


def _active(state: State) -> list[tuple[Any, int]]:
    counts: dict[Any, int] = {}
    for row in state[ACCOUNTS].values():
        counts[row["active"]] = counts.get(row["active"], 0) + 1
    return sorted(counts.items(), key=repr)


def _project(kafka: str, sink_url: str, spark: Any, topic: str) -> list[tuple[Any, ...]]:
    argv = ["project", "--stream", f"kafka://{kafka}", "--sink", sink_url, "--sql", ACTIVE,
            *SETTLE]  # fmt: skip
    assert main([*argv, "--topic", topic]) == 0
    stream, sink = KafkaEventStream(kafka), open_sink(sink_url, spark)
    try:
        versions = ProjectionVersions(ProjectionEngine(spark, stream, sink), "active_accounts")
        return sorted(versions.rows(), key=repr)
    finally:
        sink.close()
        stream.close()


def _printed(capsys: pytest.CaptureFixture[str]) -> str:
    """What the commands printed, rich's line wrapping undone."""
    return " ".join(capsys.readouterr().out.split())


def _assert_state(actual: State, expected: State, what: str) -> None:
    for table in TABLES:
        assert_rows_equal(actual[table], expected[table], f"{what} {table}")


def test_a_transaction_cut_at_the_tail_is_applied_only_when_whole(
    captured: Captured, spark: Any, kafka_bootstrap: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    stream = KafkaEventStream(kafka_bootstrap)
    source, copy = captured.prefix, f"pgcut-{uuid.uuid4().hex[:8]}"
    meta, last_end = _with_end(stream, f"{source}.transaction", captured.txid)
    last = captured.txid
    for suffix in (*TABLES, "transaction"):
        stream.ensure_topic(f"{copy}.{suffix}", stream.partition_count(f"{source}.{suffix}"))
    held_entries: list[tuple[str, StreamRecord]] = []
    first_step: list[tuple[str, StreamRecord]] = []
    for table in TABLES:
        for r in _records(stream, f"{source}.{table}"):
            target = (f"{copy}.{table}", r)
            (held_entries if table == ENTRIES and _txid(r) == last else first_step).append(target)
    assert held_entries, "the last transaction wrote no entries events"
    first_step += [(f"{copy}.transaction", r) for r in meta if r is not last_end]
    sinks = {kind: f"{kind}://{tmp_path}/{kind}" + (".duckdb" if kind == "duckdb" else "")
             for kind in ("duckdb", "delta")}  # fmt: skip
    accounts_topic = f"{copy}.{ACCOUNTS}"
    try:
        _copy(stream, first_step)  # 1. no END, no entries part
        for kind, url in sinks.items():
            _assert_state(_mirror(kafka_bootstrap, url, spark, copy), captured.before, kind)
            assert "holding 1 source transaction(s) back" in _printed(capsys)
        half = _mirror(kafka_bootstrap, f"duckdb://{tmp_path}/per-event.duckdb", spark, copy,
                       "--per-event")  # fmt: skip
        assert half[ACCOUNTS] != captured.before[ACCOUNTS]  # the control: the half state
        assert half[ENTRIES] == captured.before[ENTRIES]
        projected = f"duckdb://{tmp_path}/projection.duckdb"
        assert _project(kafka_bootstrap, projected, spark, accounts_topic) == _active(
            captured.before
        )
        _copy(stream, [(f"{copy}.transaction", last_end)])  # 2. its END: entries still missing
        for kind, url in sinks.items():
            _assert_state(_mirror(kafka_bootstrap, url, spark, copy), captured.before, kind)
            assert "holding 1 source transaction(s) back" in _printed(capsys)
        pattern = copy.replace("-", "\\-") + r"\.public\..*"
        assert (
            main(
                [
                    "replay",
                    "--stream",
                    f"kafka://{kafka_bootstrap}",
                    "--sink",
                    f"duckdb://{tmp_path}/dry.duckdb",
                    "--topics",
                    pattern,
                    "--dry-run",
                ]
            )
            == 0
        )
        out = _printed(capsys)
        assert f"whole source transactions (metadata topic {copy}.transaction)" in out
        # A projection of accounts alone has all of its part now.
        assert _project(kafka_bootstrap, projected, spark, accounts_topic) == _active(
            captured.after
        )
        _copy(stream, held_entries)  # 3. the entries part arrives: caught up whole
        for kind, url in sinks.items():
            _assert_state(_mirror(kafka_bootstrap, url, spark, copy), captured.after, kind)
            assert "holding" not in _printed(capsys)
    finally:
        stream.close()
    assert captured.before[ACCOUNTS] != captured.after[ACCOUNTS]
    assert captured.before[ENTRIES] != captured.after[ENTRIES]
