"""DuckDB tables, tombstones and the offsets ledger, each write one DuckDB transaction.

Works on an open DuckDB connection (the caller owns it; read-only for reads) and on batches given
as SQL relations (``read_parquet(...)`` of staged files), so the whole write (data, tombstones,
ledger) is plain SQL between ``BEGIN`` and ``COMMIT``: a crash at any point leaves the table and
its ledger at the previous commit, never the data behind or ahead of the ledger
(tests/replay/sinks kills a process mid-merge to check it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cdc.streams.protocol import TopicPartition
from replay.sinks import merge_rules as rules
from replay.sinks.duckdb_files import table_exists
from replay.sinks.ledger import UncastableValuesError, now_ms, plan_positions
from replay.sinks.protocol import (
    DEAD_LETTER_TABLE,
    OP,
    OP_DELETE,
    OP_REJECTED,
    POS,
    TRUNCATED,
    LedgerEntry,
    Positions,
    RejectedRecordsError,
    TableSpec,
)

LEDGER = "_replicator_ledger"
CATALOG = "_replicator_tables"
_BATCH = "_replicator_batch"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {LEDGER} (table_name VARCHAR NOT NULL, version BIGINT NOT NULL,
    topic VARCHAR, "partition" INTEGER, next_offset BIGINT, committed_at_ms BIGINT NOT NULL,
    mode VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS {CATALOG} (table_name VARCHAR PRIMARY KEY,
    primary_key VARCHAR NOT NULL, spark_schema VARCHAR NOT NULL);
"""
Columns = Sequence[tuple[str, str]]


def _tables(spec: TableSpec, columns: Columns) -> list[tuple[str, Columns]]:
    """The table and its tombstones, each with its data columns (``__pos`` comes after)."""
    types = dict(columns)
    keys = [(k, types[k]) for k in spec.primary_key]
    return [(spec.name, list(columns)), (rules.tombstones_table(spec.name), keys)]


def _definition(spec: TableSpec, body: Columns, *, keyed: bool = True) -> str:
    """``(columns, __pos, PRIMARY KEY (...))`` of a table with ``body`` as its data columns."""
    defs = ", ".join(f"{quote(c)} {t}" for c, t in [*body, (POS, "VARCHAR")])
    keys = ", ".join(quote(k) for k in spec.primary_key)
    return f"({defs}, PRIMARY KEY ({keys}))" if keyed else f"({defs})"


def quote(name: str) -> str:
    """A DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


class DuckDBStore:
    """Replace/merge/ledger SQL over one DuckDB connection (see the module doc)."""

    def __init__(self, conn: Any, *, writable: bool = True) -> None:
        self.conn = conn
        if not writable:  # a read-only view of a file the sink may not have written yet
            self.ready = table_exists(conn, LEDGER) and table_exists(conn, CATALOG)
            return
        # DuckDB 1.5 writes big appends to the database file before commit ("optimistic
        # writes"); a SIGKILL while such a commit is written to the WAL replays part of the
        # transaction (new rows without its deletes or ledger rows: found by the crash test;
        # cf. duckdb/duckdb#25931). Kept in memory, a big commit goes to the WAL whole, and an
        # unfinished WAL commit is dropped on replay.
        conn.execute("SET enable_optimistic_write = false")
        conn.execute(_SCHEMA)
        self.ready = True

    def history(self, table: str) -> list[LedgerEntry]:
        """The table's checkpoints, oldest first."""
        return self._entries(table, latest_only=False)

    def latest(self, table: str) -> LedgerEntry | None:
        """The table's newest checkpoint (a follow round reads it several times: not the whole
        history, which grows by one entry per round)."""
        found = self._entries(table, latest_only=True)
        return found[-1] if found else None

    def _entries(self, table: str, *, latest_only: bool) -> list[LedgerEntry]:
        if not self.ready:
            return []
        newest = f" AND version = (SELECT max(version) FROM {LEDGER} WHERE table_name = $1)"
        rows = self.conn.execute(
            f'SELECT version, topic, "partition", next_offset, committed_at_ms, mode FROM {LEDGER}'
            f" WHERE table_name = $1{newest if latest_only else ''}"
            ' ORDER BY version, topic, "partition"',
            [table],
        ).fetchall()
        entries: dict[int, LedgerEntry] = {}
        for version, topic, partition, offset, at_ms, mode in rows:
            entry = entries.setdefault(version, LedgerEntry(table, version, {}, at_ms, mode))
            if topic is not None:
                entry.positions[TopicPartition(topic, partition)] = offset
        return list(entries.values())

    def tables(self) -> list[str]:
        """Every table written through the store."""
        if not self.ready:
            return []
        rows = self.conn.execute(f"SELECT table_name FROM {CATALOG} ORDER BY 1").fetchall()
        return [r[0] for r in rows]

    def spark_schema(self, table: str) -> str | None:
        """The Spark schema (JSON) the table was written with, None if there is no such table."""
        if not self.ready:
            return None
        row = self.conn.execute(
            f"SELECT spark_schema FROM {CATALOG} WHERE table_name = ?", [table]
        ).fetchone()
        return None if row is None else str(row[0])

    def replace(
        self, spec: TableSpec, columns: Columns, source: str, positions: Positions, schema: str
    ) -> LedgerEntry | None:
        """Recreate the table from ``source`` (data columns then ``__pos``), one transaction."""
        with self.transaction():
            record = self._plan(spec.name, "replace", positions)
            if record is None:
                return None
            self._create(spec, columns, replace=True)
            names, table = ", ".join(quote(c) for c, _ in [*columns, (POS, "")]), quote(spec.name)
            self.conn.execute(f"INSERT INTO {table} ({names}) SELECT * FROM ({source})")
            # Keyed once filled: DuckDB indexes a whole table in bulk (1 M rows 1.3 s, not 1.8 s)
            keys = ", ".join(quote(k) for k in spec.primary_key)
            self.conn.execute(f"ALTER TABLE {table} ADD PRIMARY KEY ({keys})")
            return self._record(spec, schema, "replace", record)

    def merge(
        self, spec: TableSpec, columns: Columns, source: str, positions: Positions, schema: str
    ) -> LedgerEntry | None:
        """Apply the change batch ``source`` (data and meta columns), one transaction."""
        with self.transaction():
            record = self._plan(spec.name, "merge", positions)
            if record is None:
                return None
            self.conn.execute(f"CREATE OR REPLACE TEMP TABLE {_BATCH} AS {source}")
            truncated = clears_table(self.conn, _BATCH, spec.name)
            self._evolve(spec, columns, schema)
            self._create(spec, columns, replace=False)
            table, tombs = quote(spec.name), quote(rules.tombstones_table(spec.name))
            if truncated:
                self.conn.execute(f"DELETE FROM {table}; DELETE FROM {tombs}")
            keys = ", ".join(quote(k) for k in spec.primary_key)
            self.conn.execute(
                f"INSERT INTO {tombs} ({keys}, {POS}) SELECT {keys}, {POS} FROM {_BATCH}"
                f" WHERE {OP} = '{OP_DELETE}' ON CONFLICT ({keys})"
                f" DO UPDATE SET {POS} = greatest({POS}, excluded.{POS})"
            )
            self.conn.execute(self._merge_sql(spec, [c for c, _ in columns]))
            self.conn.execute(f"DROP TABLE {_BATCH}")
            return self._record(spec, schema, "merge", record)

    def _merge_sql(self, spec: TableSpec, data: list[str]) -> str:
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in spec.primary_key)
        cols = [*data, POS]
        # Keys are equal where matched: an UPDATE that sets an indexed column is a delete and
        # an insert in DuckDB, ~100x slower on a stored table (20,000 rows: 10 s, not 0.1 s).
        sets = [c for c in cols if c not in spec.primary_key]
        tombs = quote(rules.tombstones_table(spec.name))
        return (
            f"MERGE INTO {quote(spec.name)} t USING (SELECT * FROM (SELECT b.*,"
            f" x.{POS} AS {rules.TOMBSTONE_POS} FROM {_BATCH} b LEFT JOIN {tombs} x ON "
            + " AND ".join(f"b.{quote(k)} = x.{quote(k)}" for k in spec.primary_key)
            + f") WHERE {rules.NOT_TOMBSTONED}) s ON ({on})"
            f" WHEN MATCHED AND {rules.DELETE_WHEN} THEN DELETE"
            f" WHEN MATCHED AND {rules.UPDATE_WHEN} THEN UPDATE SET "
            + ", ".join(f"{quote(c)} = s.{quote(c)}" for c in sets)
            + f" WHEN NOT MATCHED AND {rules.INSERT_WHEN} THEN INSERT ("
            + ", ".join(quote(c) for c in cols)
            + ") VALUES ("
            + ", ".join(f"s.{quote(c)}" for c in cols)
            + ")"
        )

    def _plan(
        self, table: str, mode: str, positions: Positions
    ) -> dict[TopicPartition, int] | None:
        if table.startswith("_replicator_") and table != DEAD_LETTER_TABLE:
            raise ValueError(f"table name {table!r} is reserved for the sink's own tables")
        latest = self.latest(table)
        return plan_positions(table, mode, latest.positions if latest else None, positions)

    def _evolve(self, spec: TableSpec, columns: Columns, schema: str) -> None:
        """The table (and its tombstones) rewritten to ``columns`` when the batch's schema
        differs from the one the table was written with, in the write's transaction: kept
        columns cast (widened) to their new type, added ones filled with ``spec.defaults`` or
        NULL, dropped ones gone."""
        stored = self.spark_schema(spec.name)
        if stored is None or stored == schema or not table_exists(self.conn, spec.name):
            return
        kept = {f["name"]: f["type"] for f in json.loads(stored)["fields"]}
        retyped = {f["name"] for f in json.loads(schema)["fields"] if kept.get(f["name"], f["type"])
                   != f["type"]}  # fmt: skip
        for name, body in _tables(spec, columns):
            values, params = [], []
            for column, kind in body:
                if column in kept:
                    if column in retyped:  # only a changed type can hold uncastable values
                        self._check_cast(name, column, kind)
                    values.append(f"CAST({quote(column)} AS {kind})")
                elif column in spec.defaults:
                    values.append(f"CAST(? AS {kind})")
                    params.append(spec.defaults[column])
                else:
                    values.append(f"CAST(NULL AS {kind})")
            evolving = quote(f"{name}__evolving")
            self.conn.execute(f"CREATE TABLE {evolving} {_definition(spec, body)}")
            self.conn.execute(
                f"INSERT INTO {evolving} SELECT {', '.join(values)}, {POS} FROM {quote(name)}",
                params,
            )
            self.conn.execute(f"DROP TABLE {quote(name)}")
            self.conn.execute(f"ALTER TABLE {evolving} RENAME TO {quote(name)}")

    def _check_cast(self, table: str, column: str, kind: str) -> None:
        """Raise ``UncastableValuesError`` when a stored value of ``column`` does not cast."""
        name = quote(column)
        row = self.conn.execute(
            f"SELECT any_value(typeof({name})), count(*) FROM {quote(table)}"
            f" WHERE {name} IS NOT NULL AND TRY_CAST({name} AS {kind}) IS NULL"
        ).fetchone()
        if row and row[1]:
            raise UncastableValuesError(table, column, str(row[0]), kind)

    def _create(self, spec: TableSpec, columns: Columns, *, replace: bool) -> None:
        """The table and its tombstones; a replaced table without its key (``replace`` adds it)."""
        verb = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE IF NOT EXISTS"
        for name, body in _tables(spec, columns):
            keyed = not replace or name != spec.name
            self.conn.execute(f"{verb} {quote(name)} {_definition(spec, body, keyed=keyed)}")
        existing = [
            r[0]
            for r in self.conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main'"
                " AND table_name = ? ORDER BY ordinal_position",
                [spec.name],
            ).fetchall()
        ]
        if existing != [c for c, _ in columns] + [POS]:
            raise ValueError(
                f"table {spec.name} has columns {existing}; the batch has {[c for c, _ in columns]}"
                " (schema changes need a replace)"
            )

    def _record(
        self, spec: TableSpec, schema: str, mode: str, positions: dict[TopicPartition, int]
    ) -> LedgerEntry:
        row = self.conn.execute(
            f"SELECT coalesce(max(version), -1) + 1 FROM {LEDGER} WHERE table_name = ?", [spec.name]
        ).fetchone()
        version, at_ms = int(row[0]) if row else 0, now_ms()
        rows: list[tuple[object, ...]] = [
            (spec.name, version, tp.topic, tp.partition, off, at_ms, mode)
            for tp, off in sorted(positions.items())
        ]
        self.conn.executemany(
            f"INSERT INTO {LEDGER} VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows or [(spec.name, version, None, None, None, at_ms, mode)],
        )
        self.conn.execute(
            f"INSERT OR REPLACE INTO {CATALOG} VALUES (?, ?, ?)",
            [spec.name, json.dumps(list(spec.primary_key)), schema],
        )
        return LedgerEntry(spec.name, version, positions, at_ms, mode)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN`` … ``COMMIT``; ``ROLLBACK`` on any exception."""
        self.conn.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


def clears_table(conn: Any, batch: str, table: str) -> bool:
    """Whether the staged change ``batch`` for ``table`` clears it first (a truncate); raises
    ``RejectedRecordsError`` for a batch that marks bad records (the caller rolls back)."""
    stats = conn.execute(
        f"SELECT bool_or({TRUNCATED}), count(*) FILTER (WHERE {OP} = '{OP_REJECTED}') FROM {batch}"
    ).fetchone()
    if stats and stats[1]:
        raise RejectedRecordsError(table, int(stats[1]))
    return bool(stats and stats[0])
