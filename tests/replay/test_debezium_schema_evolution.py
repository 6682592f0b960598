"""A table altered while Debezium captures it: every record decodes by its own schema.

PostgreSQL runs, mid-stream, ``ADD COLUMN`` (nullable), ``ADD COLUMN ... NOT NULL DEFAULT 7``,
``numeric(10,2)`` -> ``numeric(12,4)``, ``integer`` -> ``bigint`` and ``DROP COLUMN``, touching
only a few rows after each change, so most rows' newest event predates every change: they must
read NULL / the default, their old-scale prices exactly, and the dropped column not at all. The
replica is compared with the database at the end and, with an LSN cut, as it was between two
changes (with the columns it had then), in DuckDB and Delta.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime import pg_client
from cdc.runtime.debezium_capture import CaptureOptions, DebeziumCapture
from cdc.runtime.postgres import LocalPostgres
from cdc.streams.kafka_stream import KafkaEventStream
from replay.cli.main import main
from replay.projection.engine import ProjectionEngine
from replay.projection.versions import ProjectionVersions
from replay.sinks.registry import open_sink
from replay.tables.engine import target_table

pytestmark = pytest.mark.integration

TABLE = "public.items"
Rows = dict[int, dict[str, Any]]


@dataclass
class Evolved:
    """The capture's topic and the database's rows (with their columns) along the changes."""

    topic: str
    cut_lsn: int = 0
    at_cut: Rows = field(default_factory=dict)
    end: Rows = field(default_factory=dict)


def database_rows(conn: Any) -> Rows:
    cursor = conn.execute("SELECT * FROM items")
    names = [column.name for column in cursor.description or ()]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return {row.pop("id"): row for row in rows}


def _touch(conn: Any, rng: random.Random, sql: str, count: int, values: Any) -> None:
    for key in rng.sample(range(1, 61), count):
        conn.execute(sql, (*values(), key))


@pytest.fixture(scope="module")
def evolved(
    postgres: LocalPostgres, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Evolved]:
    dsn = postgres.create_database(f"evolve_{uuid.uuid4().hex[:8]}")
    prefix = f"pgevolve-{uuid.uuid4().hex[:8]}"
    options = CaptureOptions(pg_dsn=dsn, bootstrap=kafka_bootstrap, topic_prefix=prefix,
                             tables=(TABLE,))  # fmt: skip
    conn = pg_client.connect(dsn)
    rng = random.Random(19)
    conn.execute(
        "CREATE TABLE items (id integer PRIMARY KEY, qty integer NOT NULL, price numeric(10,2),"
        " note text)"
    )

    def money() -> Decimal:
        return Decimal(rng.randrange(-(10**6), 10**6)) / 100

    for key in range(1, 31):  # read by the snapshot
        conn.execute(
            "INSERT INTO items VALUES (%s, %s, %s, %s)", (key, key * 3, money(), f"n{key}")
        )
    capture = DebeziumCapture(options, tmp_path_factory.mktemp("capture-evolve"))
    capture.start()
    try:
        capture.wait_caught_up()
        for key in range(31, 61):
            conn.execute("INSERT INTO items VALUES (%s, %s, %s, %s)", (key, key, money(), None))
        conn.execute("ALTER TABLE items ADD COLUMN color text")
        _touch(conn, rng, "UPDATE items SET color = %s WHERE id = %s", 5, lambda: ("red",))
        conn.execute("ALTER TABLE items ADD COLUMN rank integer NOT NULL DEFAULT 7")
        _touch(conn, rng, "UPDATE items SET rank = %s WHERE id = %s", 5,
               lambda: (rng.randrange(100),))  # fmt: skip
        found = Evolved(options.table_topic(TABLE))
        found.cut_lsn, found.at_cut = pg_client.current_wal_lsn(dsn) - 1, database_rows(conn)
        conn.execute("ALTER TABLE items ALTER COLUMN price TYPE numeric(12,4)")
        _touch(conn, rng, "UPDATE items SET price = %s WHERE id = %s", 5,
               lambda: (Decimal(rng.randrange(10**9)) / 10**4,))  # fmt: skip
        conn.execute("ALTER TABLE items ALTER COLUMN qty TYPE bigint")
        _touch(conn, rng, "UPDATE items SET qty = %s WHERE id = %s", 5,
               lambda: (2**40 + rng.randrange(1000),))  # fmt: skip
        conn.execute("ALTER TABLE items DROP COLUMN note")
        _touch(conn, rng, "UPDATE items SET color = %s WHERE id = %s", 3, lambda: ("blue",))
        conn.execute("DELETE FROM items WHERE id IN (2, 40)")
        found.end = database_rows(conn)
        capture.wait_caught_up()
        yield found
    finally:
        capture.stop()
        conn.close()


def _replica(spark: Any, sink_url: str, table: str) -> Rows:
    sink = open_sink(sink_url, spark)
    try:
        return {r["id"]: {k: v for k, v in r.asDict().items() if k != "id"}
                for r in sink.read(table).collect()}  # fmt: skip
    finally:
        sink.close()


def assert_same(replica: Rows, database: Rows, what: str) -> None:
    assert replica.keys() == database.keys(), what
    for key, row in database.items():
        assert replica[key] == row, f"{what}: id {key}: replica {replica[key]} != database {row}"
        for name, value in row.items():  # the decimal scale too
            assert str(replica[key][name]) == str(value), f"{what}: id {key}.{name}"


def _mirror_args(kind: str, tmp_path: Path, kafka: str) -> tuple[str, list[str]]:
    """The mirror's sink URL and the ``--stream``/``--sink`` arguments of a replay into it."""
    sink_url = f"{kind}://{tmp_path}/mirror" + (".duckdb" if kind == "duckdb" else "")
    return sink_url, ["--stream", f"kafka://{kafka}", "--sink", sink_url]


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_a_rebuild_and_a_cut_between_changes_equal_the_database(
    evolved: Evolved, spark: Any, kafka_bootstrap: str, tmp_path: Path, kind: str
) -> None:
    sink_url, stream = _mirror_args(kind, tmp_path, kafka_bootstrap)
    assert main(["replay", *stream, "--topics", evolved.topic]) == 0
    end = _replica(spark, sink_url, target_table(evolved.topic))
    assert_same(end, evolved.end, f"{kind} end")
    untouched = [row for row in end.values() if row["rank"] == 7 and row["color"] is None]
    assert len(untouched) > 20  # most rows' newest event predates both ADD COLUMNs
    lsn = evolved.cut_lsn
    cut = ["--until", f"lsn:{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}", "--into", "items_at_cut"]
    assert main(["replay", *stream, "--topics", evolved.topic, *cut]) == 0
    assert_same(_replica(spark, sink_url, "items_at_cut"), evolved.at_cut, f"{kind} at the cut")


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_catch_ups_across_the_changes_evolve_the_replica(
    evolved: Evolved, spark: Any, kafka_bootstrap: str, tmp_path: Path, kind: str
) -> None:
    sink_url, stream = _mirror_args(kind, tmp_path, kafka_bootstrap)
    table = target_table(evolved.topic)
    # before any change; then across both ADD COLUMNs; then across the type changes and the DROP
    for stop in (f"{evolved.topic}:0:60", f"{evolved.topic}:0:72", "latest"):
        assert main(["replay", *stream, "--topics", evolved.topic, "--until", stop]) == 0
        if stop.endswith(":60"):
            assert "rank" not in _replica(spark, sink_url, table)[1]
    assert_same(_replica(spark, sink_url, table), evolved.end, f"{kind} caught up")


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_projections_keep_their_unchanged_columns_and_refuse_changed_ones(
    evolved: Evolved, spark: Any, kafka_bootstrap: str, tmp_path: Path, kind: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    stream = ["--stream", f"kafka://{kafka_bootstrap}", "--topic", evolved.topic]
    sink_url = f"{kind}://{tmp_path}/projections" + (".duckdb" if kind == "duckdb" else "")
    colors = "CREATE TABLE colors AS SELECT color, count(*) AS n FROM items GROUP BY color"
    assert main(["project", *stream, "--sink", sink_url, "--sql", colors]) == 0
    stream_, sink = KafkaEventStream(kafka_bootstrap), open_sink(sink_url, spark)
    try:
        versions = ProjectionVersions(ProjectionEngine(spark, stream_, sink), "colors")
        projected = {row[0]: row[1] for row in versions.rows()}
    finally:
        sink.close()
        stream_.close()
    expected: dict[Any, int] = {}
    for row in evolved.end.values():
        expected[row["color"]] = expected.get(row["color"], 0) + 1
    assert projected == expected
    capsys.readouterr()
    retyped = "CREATE TABLE stock AS SELECT sum(qty) AS q FROM items"
    assert main(["project", *stream, "--sink", sink_url, "--sql", retyped]) == 2
    err = capsys.readouterr().err
    assert "column qty of topic" in err and "changed type (int -> bigint)" in err, err
    dropped = "CREATE TABLE notes AS SELECT note, count(*) AS n FROM items GROUP BY note"
    assert main(["project", *stream, "--sink", sink_url, "--sql", dropped]) == 2
    assert "has no column note (dropped from the source table)" in capsys.readouterr().err
