"""Debezium's PostgreSQL connector, schemas off, in each ``time.precision.mode`` with a
``binary.handling.mode`` beside it, mirrored by ``replicator replay --schema`` into DuckDB and
Delta: the replica equals the database (in ``connect`` mode, as far as milliseconds carry it:
Debezium truncates finer digits in that mode, and so does the expected state here).

The table has time(3), time(6), timestamp(0), timestamp(3), timestamp(6), date and bytea columns
with values at every precision, NULLs and empty bytes, snapshot rows, inserts, updates and
deletes.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime import pg_client
from cdc.runtime.debezium_capture import CaptureOptions, DebeziumCapture
from cdc.runtime.postgres import LocalPostgres
from replay.cli.main import main
from replay.sinks.registry import open_sink
from replay.tables.engine import target_table

pytestmark = pytest.mark.integration

TABLE = "public.media"
SCHEMA = """
CREATE TABLE media (id integer PRIMARY KEY, t3 time(3), t6 time, ts0 timestamp(0),
  ts3 timestamp(3), ts6 timestamp, day date, blob bytea);
"""
COLUMNS = ("t3", "t6", "ts0", "ts3", "ts6", "day", "blob")
MODES = [("adaptive", "hex"), ("adaptive_time_microseconds", "base64-url-safe"),
         ("connect", "base64")]  # fmt: skip
Rows = dict[int, dict[str, Any]]


def declarations(topic: str, time_mode: str, binary_mode: str) -> dict[str, Any]:
    """The ``--schema`` document, as a user of that connector configuration writes it."""
    return {topic: {
        "key": ["id"], "time.precision.mode": time_mode, "binary.handling.mode": binary_mode,
        "columns": {
            "id": "int32", "t3": {"type": "time", "precision": 3}, "t6": "time",
            "ts0": {"type": "timestamp", "precision": 0},
            "ts3": {"type": "timestamp", "precision": 3}, "ts6": "timestamp", "day": "date",
            "blob": "bytes",
        },
    }}  # fmt: skip


def _values(rng: random.Random) -> tuple[Any, ...]:
    micros = rng.randrange(86_400_000_000)
    instant = dt.datetime(1969, 6, 1) + dt.timedelta(microseconds=rng.randrange(2 * 10**15))
    blob = rng.randbytes(rng.choice((0, 1, 3, 17, 40)))
    values = (_clock(micros), _clock(micros // 7), instant, instant, instant, instant.date(), blob)
    return tuple(None if rng.random() < 0.1 else v for v in values)


def _clock(micros: int) -> dt.time:
    return (dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=micros)).time()


def _write(conn: Any, rng: random.Random, ids: range) -> None:
    placeholders = ", ".join(["%s"] * (len(COLUMNS) + 1))
    for key in ids:
        conn.execute(f"INSERT INTO media VALUES ({placeholders})", (key, *_values(rng)))


def _change(conn: Any, rng: random.Random, live: list[int]) -> None:
    sets = ", ".join(f"{c} = %s" for c in COLUMNS)
    for key in rng.sample(live, 15):
        conn.execute(f"UPDATE media SET {sets} WHERE id = %s", (*_values(rng), key))
    for key in rng.sample(live, 5):
        conn.execute("DELETE FROM media WHERE id = %s", (key,))


def database_rows(conn: Any, millis_only: bool) -> Rows:
    """The table's rows as the mirror holds them: times as microseconds since midnight, bytes;
    with ``millis_only``, truncated to milliseconds as Debezium's ``connect`` mode does."""
    rows: Rows = {}
    for record in conn.execute("SELECT id, " + ", ".join(COLUMNS) + " FROM media").fetchall():
        row = dict(zip(("id", *COLUMNS), record, strict=True))
        for name in ("t3", "t6"):
            if row[name] is not None:
                value = row[name]
                row[name] = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + (
                    value.microsecond
                )
                row[name] -= row[name] % 1000 if millis_only else 0
        for name in ("ts0", "ts3", "ts6"):
            if row[name] is not None and millis_only:
                row[name] = row[name].replace(microsecond=row[name].microsecond // 1000 * 1000)
        row["blob"] = None if row["blob"] is None else bytes(row["blob"])
        rows[row.pop("id")] = row
    return rows


@pytest.fixture(scope="module", params=MODES, ids=["-".join(m) for m in MODES])
def captured(
    request: pytest.FixtureRequest,
    postgres: LocalPostgres,
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, str, Rows]]:
    """(time mode, binary mode, topic, the database's final rows) of one capture."""
    time_mode, binary_mode = request.param
    dsn = postgres.create_database(f"modes_{uuid.uuid4().hex[:8]}")
    options = CaptureOptions(
        pg_dsn=dsn, bootstrap=kafka_bootstrap, topic_prefix=f"pgmodes-{uuid.uuid4().hex[:8]}",
        tables=(TABLE,), schemas_enable=False,
        properties={"time.precision.mode": time_mode, "binary.handling.mode": binary_mode},
    )  # fmt: skip
    conn = pg_client.connect(dsn)
    conn.execute(SCHEMA)
    rng = random.Random(20261125)
    _write(conn, rng, range(1, 31))  # read by the snapshot
    capture = DebeziumCapture(options, tmp_path_factory.mktemp(f"capture-{time_mode}"))
    capture.start()
    try:
        capture.wait_caught_up()
        _write(conn, rng, range(31, 61))
        _change(conn, rng, list(range(1, 61)))
        end = database_rows(conn, millis_only=time_mode == "connect")
        capture.wait_caught_up()
        yield time_mode, binary_mode, options.table_topic(TABLE), end
    finally:
        capture.stop()
        conn.close()


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_a_capture_in_each_time_and_binary_mode_mirrors_the_database(
    captured: tuple[str, str, str, Rows], spark: Any, kafka_bootstrap: str, tmp_path: Path,
    kind: str,
) -> None:  # fmt: skip
    time_mode, binary_mode, topic, end = captured
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(declarations(topic, time_mode, binary_mode), indent=2))
    sink_url = f"{kind}://{tmp_path}/mirror" + (".duckdb" if kind == "duckdb" else "")
    argv = ["replay", "--stream", f"kafka://{kafka_bootstrap}", "--sink", sink_url,
            "--topics", topic, "--schema", str(schema)]  # fmt: skip
    assert main(argv) == 0
    sink = open_sink(sink_url, spark)
    try:
        rows: Rows = {}
        for record in sink.read(target_table(topic)).collect():
            row = {name: record[name] for name in COLUMNS}
            row["blob"] = None if row["blob"] is None else bytes(row["blob"])
            rows[record["id"]] = row
    finally:
        sink.close()
    assert len(end) == 55 and any(r["blob"] == b"" for r in end.values())
    assert rows.keys() == end.keys()
    for key, row in end.items():
        assert rows[key] == row, f"{time_mode}/{binary_mode} {kind} id {key}"
