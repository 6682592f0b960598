"""The captured PostgreSQL source of ``test_debezium_mirror``: a database with the seeded workload,
its Debezium capture and the states recorded along it; and the comparison of a mirror's rows with
the database's (see that module's doc for the workload and the cuts)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.runtime import pg_client
from cdc.runtime.debezium_capture import CaptureOptions, DebeziumCapture
from cdc.runtime.postgres import LocalPostgres
from replay.sinks.protocol import Sink
from replay.spark import F, T
from tests.cdc.runtime.pg_workload import KEY_COLUMNS, TABLES, Workload

PARTITIONS = 3
Rows = dict[tuple[Any, ...], dict[str, Any]]
State = dict[str, Rows]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def database_state(conn: Any) -> State:
    """Every row of the captured tables, by primary key, as psycopg reads them."""
    state: State = {}
    for table in TABLES:
        cursor = conn.execute(f"SELECT * FROM {table}")
        names = [column.name for column in cursor.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        state[table] = {tuple(r[c] for c in KEY_COLUMNS[table]): _normal(r) for r in rows}
    return state


def _normal(row: dict[str, Any]) -> dict[str, Any]:
    """jsonb and uuid as the mirror holds them (JSON text, UUID text) read back as values."""
    out = dict(row)
    if "profile" in out and isinstance(out["profile"], str):
        out["profile"] = json.loads(out["profile"])
    if "external_id" in out and out["external_id"] is not None:
        out["external_id"] = uuid.UUID(str(out["external_id"]))
    return out


def mirror_rows(sink: Sink, table: str, spec: str) -> Rows:
    """The mirror's rows of ``spec`` (``schema.table``) in the sink's ``table``, by primary key;
    timestamps read as exact microseconds and returned as UTC datetimes."""
    frame = sink.read(table)
    instants = [f.name for f in frame.schema.fields if isinstance(f.dataType, T.TimestampType)]
    frame = frame.withColumns({name: F.unix_micros(F.col(name)) for name in instants})
    rows: Rows = {}
    for record in frame.collect():
        row = record.asDict()
        for name in instants:
            if row[name] is not None:
                row[name] = _EPOCH + dt.timedelta(microseconds=row[name])
        rows[tuple(row[c] for c in KEY_COLUMNS[spec])] = _normal(row)
    return rows


def assert_rows_equal(actual: Rows, expected: Rows, what: str) -> None:
    assert actual.keys() == expected.keys(), (
        f"{what}: keys only in the mirror {sorted(actual.keys() - expected.keys())[:5]}, "
        f"only in the database {sorted(expected.keys() - actual.keys())[:5]}"
    )
    for key, row in expected.items():
        assert actual[key] == row, f"{what} {key}: mirror {actual[key]} != database {row}"
        for name, value in row.items():  # exact types too: Decimal scale, aware datetimes
            if isinstance(value, Decimal):
                assert str(actual[key][name]) == str(value), f"{what} {key}.{name}"


@dataclass
class Source:
    """The captured database, its topics and the states recorded along the workload."""

    dsn: str
    options: CaptureOptions
    capture: DebeziumCapture
    conn: Any
    workload: Workload
    mid_lsn: int = 0
    mid: State = field(default_factory=dict)
    inside_lsn: int = 0
    inside: State = field(default_factory=dict)
    end: State = field(default_factory=dict)

    @property
    def topics(self) -> dict[str, str]:
        """Table (``schema.table``) -> topic."""
        return {table: self.options.table_topic(table) for table in TABLES}

    def close(self) -> None:
        self.capture.stop()
        self.conn.close()

    @property
    def pattern(self) -> str:
        """A regex of the table topics (not the transaction topic)."""
        return self.options.topic_prefix.replace("-", "\\-") + r"\.public\..*"


def _big_transaction(source: Source) -> None:
    """A transaction over both tables with a cut inside it: its ``entries`` part (and part of
    its ``accounts`` part) lie before the cut, the rest of ``accounts`` after."""
    workload = source.workload
    source.inside = database_state(source.conn)
    with source.conn.transaction():
        for step in (workload._insert_entry, workload._update_entry, workload._delete_entry) * 4:
            step()
        for step in (workload._insert_account, workload._update_account) * 3:
            step()
        row = source.conn.execute(
            "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"
        ).fetchone()
        source.inside_lsn = int(row[0])
        for step in (workload._update_account, workload._delete_account, workload._insert_account):
            step()
    workload.transactions += 1


def captured_database(
    postgres: LocalPostgres, bootstrap: str, work_dir: Path, name: str, *, seed: int,
    accounts: int, entries: int, **options: Any,
) -> tuple[CaptureOptions, Any, Workload, DebeziumCapture]:  # fmt: skip
    """A new database (``name_<random>``) with the workload's tables and seed rows, and its
    capture into new topics (prefix ``pg<name>-<random>``, ``options`` as ``CaptureOptions``
    takes them), started: (options, connection, workload, capture). Stop the capture and close
    the connection after."""
    tag = uuid.uuid4().hex[:8]
    dsn = postgres.create_database(f"{name}_{tag}")
    chosen = CaptureOptions(
        pg_dsn=dsn, bootstrap=bootstrap, topic_prefix=f"pg{name}-{tag}", tables=TABLES, **options
    )
    conn = pg_client.connect(dsn)
    workload = Workload(conn, seed=seed)
    workload.create_schema()
    workload.seed_rows(accounts=accounts, entries=entries)
    capture = DebeziumCapture(chosen, work_dir)
    capture.start()
    return chosen, conn, workload, capture


def start_source(postgres: LocalPostgres, bootstrap: str, work_dir: Path) -> Source:
    """A new database captured into new topics, the workload run and its states recorded."""
    options, conn, workload, capture = captured_database(
        postgres, bootstrap, work_dir, "mirror", seed=20250301, accounts=15, entries=40,
        transaction_metadata=True, partitions=PARTITIONS,
    )  # fmt: skip
    found = Source(options.pg_dsn, options, capture, conn, workload)
    try:
        capture.wait_caught_up()
        workload.run(transactions=60)
        workload.change_keys()
        workload.truncate_entries()
        workload.run(transactions=40)
        found.mid = database_state(conn)
        found.mid_lsn = pg_client.current_wal_lsn(options.pg_dsn)
        workload.run(transactions=40)
        _big_transaction(found)
        workload.run(transactions=40)
        workload.change_keys()
        found.end = database_state(conn)
        capture.wait_caught_up()
    except BaseException:
        found.close()
        raise
    return found
