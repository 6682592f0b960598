"""Projections in a DuckDB sink: every batch is one DuckDB transaction holding the projection's
tables, its source mirror and its own ledger entry.

A batch's changes arrive as a Spark DataFrame, staged (Arrow or Parquet) like the sink's own writes
(:class:`~replay.sinks.duckdb_sink.DuckDBSink`), then, between ``BEGIN`` and ``COMMIT``: the
ledger check (a batch whose positions the projection's ledger covers is skipped), the mirror's
and the plan's statements, and the ledger rows (``_replicator_ledger``, keyed by the projection's
stored table). A crash anywhere rolls back to the previous batch; a retry is skipped or redone.
Blue/green state lives in ``_replicator_projections`` and changes in the same transaction as the
readers' view, so a swap is atomic.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cdc.streams.protocol import TopicPartition
from projections import IncrementalPlan
from projections.sql.syntax import DUCKDB
from replay.sinks.duckdb_files import table_exists
from replay.sinks.duckdb_sink import DuckDBSink, _literal, fits_arrow
from replay.sinks.duckdb_store import LEDGER, clears_table, quote
from replay.sinks.duckdb_types import restored_column
from replay.sinks.ledger import VersionUnavailableError, now_ms, plan_positions
from replay.sinks.protocol import OP, OP_UPSERT, LedgerEntry, Positions
from replay.sinks.sql_projection import MirrorSql
from replay.spark import DataFrame

REGISTRY = "_replicator_projections"
_BATCH, _SIGNED, _ROWS = "__projection_batch", "__projection_signed", "__projection_rows"


class DuckDBProjectionStore:
    """Runs projection batches, blue/green swaps and reads on a :class:`DuckDBSink`."""

    dialect = DUCKDB
    batch_on_driver = False  # staged as Arrow or Parquet, signed in DuckDB

    def __init__(self, sink: DuckDBSink) -> None:
        self.sink, self.spark = sink, sink.spark

    @property
    def conn(self) -> Any:
        """The connection of the sink's current read or write session."""
        return self.sink.connection()

    def positions(self, table: str) -> dict[TopicPartition, int]:
        """The positions the projection stored in ``table`` reflects (its own ledger)."""
        return self.sink.positions(table)

    def apply_sql(
        self, plan: IncrementalPlan, mirror: MirrorSql, batch: DataFrame, positions: Positions,
        *, rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply one batch (``batch_changes`` columns) to a SQL projection, atomically; a batch
        with records marked bad (``__op`` ``x``, see ``replay.sinks.protocol``) raises
        ``RejectedRecordsError`` and writes nothing."""
        if self._covered(plan.table, positions):
            return None
        with self._staged(batch, _BATCH, rows_at_most) as load, self._transaction():
            record = self._plan(plan.table, positions)
            if record is None:
                return None
            load()
            truncated = clears_table(self.conn, _BATCH, plan.table)  # or raises: rolled back
            self.conn.execute(mirror.create_sql(_BATCH, DUCKDB))
            if truncated:
                self.conn.execute(mirror.clear_sql(DUCKDB))
            self.conn.execute(
                f"CREATE OR REPLACE TEMP TABLE {_SIGNED} AS {mirror.signed_sql(_BATCH, DUCKDB)}"
            )
            statements = plan.create_statements(_SIGNED, DUCKDB)
            if truncated:
                statements += plan.reset_statements(DUCKDB)
            statements += plan.apply_statements(_SIGNED, DUCKDB)
            for statement in [*statements, mirror.merge_sql(_BATCH, DUCKDB)]:
                self.conn.execute(statement)
            self.conn.execute(f"DROP TABLE {_SIGNED}; DROP TABLE {_BATCH}")
            return self._record(plan.table, record)

    def apply_rows(
        self,
        table: str,
        identity: Sequence[str],
        rows: DataFrame,
        truncated: bool,
        positions: Positions,
        *,
        rows_at_most: int | None = None,
    ) -> LedgerEntry | None:
        """Delete every ``identity`` of ``rows``, insert those with ``__op`` ``u`` (after
        clearing the table when ``truncated``) and record ``positions``, atomically."""
        if self._covered(table, positions):
            return None
        columns = [c for c in rows.columns if c != OP]
        names = ", ".join(quote(c) for c in columns)
        same = " AND ".join(f"t.{quote(k)} IS NOT DISTINCT FROM r.{quote(k)}" for k in identity)
        with self._staged(rows, _ROWS, rows_at_most) as load, self._transaction():
            record = self._plan(table, positions)
            if record is None:
                return None
            load()
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {quote(table)} AS SELECT {names} FROM {_ROWS} LIMIT 0"
            )
            if truncated:
                self.conn.execute(f"DELETE FROM {quote(table)}")
            self.conn.execute(f"DELETE FROM {quote(table)} t USING {_ROWS} r WHERE {same}")
            self.conn.execute(
                f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM {_ROWS} "
                f"WHERE {OP} = '{OP_UPSERT}'"
            )
            self.conn.execute(f"DROP TABLE {_ROWS}")
            return self._record(table, record)

    def load_state(self, name: str) -> str | None:
        """The blue/green state (JSON) of projection ``name``, None if it has none."""
        with self.sink.session(write=False) as store:
            if store is None or not table_exists(store.conn, REGISTRY):
                return None
            sql = f"SELECT state FROM {REGISTRY} WHERE name = ?"
            row = store.conn.execute(sql, [name]).fetchone()
            return None if row is None else str(row[0])

    def save_state(self, name: str, state: str, statements: Sequence[str] = ()) -> None:
        """Run ``statements`` (a view swap, drops) and store ``state``, in one transaction."""
        with self._transaction():
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {REGISTRY} (name VARCHAR PRIMARY KEY, state VARCHAR)"
            )
            for statement in statements:
                self.conn.execute(statement)
            self.conn.execute(f"INSERT OR REPLACE INTO {REGISTRY} VALUES (?, ?)", [name, state])

    def query(self, select: str, tables: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """The rows of a DuckDB query (``tables`` are named as they are stored)."""
        with self.sink.session(write=False) as store:
            if store is None:
                raise VersionUnavailableError(f"no DuckDB database at {self.sink.path}")
            return [tuple(r) for r in store.conn.execute(select).fetchall()]

    def frame(self, select: str, tables: Sequence[str] = ()) -> DataFrame:
        """A DuckDB query's result as a Spark DataFrame (materialised)."""
        with self.sink._scratch() as scratch, self.sink.session(write=False) as store:
            if store is None:
                raise VersionUnavailableError(f"no DuckDB database at {self.sink.path}")
            target = scratch / "result.parquet"
            store.conn.execute(f"COPY ({select}) TO {_literal(target)} (FORMAT parquet)")
            return self.spark.read.parquet(str(target)).localCheckpoint(eager=True)

    def drop(self, tables: Sequence[str]) -> None:
        """Drop ``tables`` and their ledger entries (a fresh rebuild of a version)."""
        with self._transaction():
            for table in tables:
                self.conn.execute(f"DROP TABLE IF EXISTS {quote(table)}")
                self.conn.execute(f"DELETE FROM {LEDGER} WHERE table_name = ?", [table])

    def _covered(self, table: str, positions: Positions) -> bool:
        return self._plan(table, positions) is None

    def _plan(self, table: str, positions: Positions) -> dict[TopicPartition, int] | None:
        latest = self.sink.latest(table)
        return plan_positions(table, "merge", latest.positions if latest else None, positions)

    def _record(self, table: str, positions: dict[TopicPartition, int]) -> LedgerEntry:
        row = self.conn.execute(
            f"SELECT coalesce(max(version), -1) + 1 FROM {LEDGER} WHERE table_name = ?", [table]
        ).fetchone()
        version, at_ms = int(row[0]) if row else 0, now_ms()
        rows: list[tuple[object, ...]] = [
            (table, version, tp.topic, tp.partition, offset, at_ms, "merge")
            for tp, offset in sorted(positions.items())
        ]
        self.conn.executemany(
            f"INSERT INTO {LEDGER} VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows or [(table, version, None, None, None, at_ms, "merge")],
        )
        return LedgerEntry(table, version, positions, at_ms, "merge")

    @contextmanager
    def _staged(self, df: DataFrame, temp: str, rows_at_most: int | None) -> Iterator[Any]:
        """Stage ``df`` (as the sink stages its writes); yields a function loading it into the
        temp table ``temp`` (called inside the transaction)."""
        fields = [df.schema[c] for c in df.columns]
        with self.sink._staged(df, fields, fits_arrow(rows_at_most)) as staged:
            restored = ", ".join(restored_column(f) for f in fields)
            yield lambda: self.conn.execute(
                f"CREATE OR REPLACE TEMP TABLE {temp} AS SELECT {restored} FROM {staged(self.conn)}"
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One DuckDB transaction in a write session of the sink (the file is held only here)."""
        with self.sink.session(write=True) as store:
            assert store is not None
            with store.transaction():
                yield
