"""The DuckDB sink: one database file, its tables, tombstones and offsets ledger.

Spark DataFrames reach DuckDB inside the write's transaction, without per-row inserts: a frame
the caller bounds to at most ``ARROW_ROWS`` rows (a ``--follow`` round, a small catch-up, the
rebuild of a table of as many live keys), or a replacing frame whose values it estimates within
``ARROW_BYTES`` (a rebuild's), as one Arrow table collected from Spark, any other as Parquet
files Spark writes in bulk next to the database (DuckDB reads them with ``read_parquet``). A
replace on a ``Guess`` (a first rebuild in one job: ``decode.clean_guess``) is staged as Arrow
as its tasks finish (or as its ``HandedRows`` hand them over), and written only if the guess
holds and the table stays within ``guess_bytes`` (``ARROW_BYTES``); else nothing is written
(``GuessFailedError``).
Every write is one DuckDB transaction holding the data, the tombstones and the ledger rows
(:mod:`replay.sinks.duckdb_store`), so exactly-once follows: a batch whose positions the ledger
covers is skipped, and a crash rolls back to the last checkpoint. DuckDB keeps only the current
version of a table; ``history()`` lists checkpoints.

The file is open only during one write or one read (:mod:`replay.sinks.duckdb_files`): other
processes can read the tables between two batches, and reading a missing database creates nothing.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cdc.streams.protocol import TopicPartition
from replay.sinks import duckdb_files
from replay.sinks.duckdb_store import DuckDBStore, quote
from replay.sinks.duckdb_types import (
    column_definitions,
    restored_column,
    staged_arrow,
    staged_columns,
)
from replay.sinks.guessed_rows import guessed_arrow
from replay.sinks.ledger import VersionUnavailableError, plan_positions
from replay.sinks.merge_rules import change_columns, row_columns
from replay.sinks.protocol import (
    META_COLUMNS,
    POS,
    Guess,
    HandedRows,
    LedgerEntry,
    Positions,
    TableSpec,
)
from replay.spark import DataFrame, F, SparkSession, T

ARROW_ROWS = 100_000
"""Frames bounded to at most this many rows are handed to DuckDB as Arrow (one collect into the
driver); larger or unbounded ones as Parquet files, which need no driver memory."""
ARROW_BYTES = 256 * 2**20
"""A table replaced with rows of at most this many bytes (as the caller estimates them) is
handed over as Arrow too, however many rows: 1 M rows of the benchmark's table (84 MB) load
~1 s faster than through Parquet (``bench/README.md``)."""
PRECHECK_REUSE_S = 5.0
"""A ledger entry this process read or wrote this recently serves a batch's pre-check (the
write's transaction checks the ledger again, so a stale one costs a wasted staging, no more)."""
Staged = Callable[[Any], str]
"""Given the write's DuckDB connection, the relation (FROM-clause text) of a staged frame."""
_arrow_names = itertools.count()


class DuckDBSink:
    """A :class:`~replay.sinks.protocol.Sink` writing to the DuckDB database file ``path``."""

    def __init__(
        self,
        path: str | Path,
        spark: SparkSession,
        *,
        lock_timeout_s: float = duckdb_files.WRITER_TIMEOUT_S,
    ) -> None:
        self.path = Path(path).resolve()
        self.url = f"duckdb://{self.path}"
        self.spark = spark
        self.lock_timeout_s = lock_timeout_s
        self._store: DuckDBStore | None = None
        self._writable = False
        self._known: dict[str, tuple[float, LedgerEntry | None]] = {}
        self.guess_bytes: int | None = ARROW_BYTES

    @contextmanager
    def session(self, *, write: bool) -> Iterator[DuckDBStore | None]:
        """The database, open for one read or one write (nested calls share it); a read of a
        database that does not exist yields None and creates nothing."""
        if self._store is not None:
            if write and not self._writable:
                raise RuntimeError("a DuckDB write inside a read session")
            yield self._store
            return
        if not write and not self.path.is_file():
            yield None
            return
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = duckdb_files.connect(self.path, read_only=not write, timeout_s=self.lock_timeout_s)
        try:
            # the replay's own progress bar reports; DuckDB's would print to stdout between lines
            conn.execute("SET enable_progress_bar = false")
            self._store, self._writable = DuckDBStore(conn, writable=write), write
            yield self._store
        finally:
            self._store, self._writable = None, False
            conn.close()  # also checkpoints the WAL into the file readers open

    def connection(self) -> Any:
        """The connection of the current session (a RuntimeError outside one)."""
        if self._store is None:
            raise RuntimeError(f"{self.url}: no DuckDB session is open")
        return self._store.conn

    def positions(self, table: str) -> dict[TopicPartition, int]:
        """The positions the table reflects (empty if it does not exist)."""
        latest = self.latest(table)
        return dict(latest.positions) if latest else {}

    def latest(self, table: str) -> LedgerEntry | None:
        """The table's newest checkpoint, None if it has none."""
        with self.session(write=False) as store:
            entry = store.latest(table) if store else None
        self._known[table] = (time.monotonic(), entry)
        return entry

    def history(self, table: str) -> list[LedgerEntry]:
        """The table's checkpoints, oldest first (version = checkpoint number)."""
        with self.session(write=False) as store:
            return store.history(table) if store else []

    def tables(self) -> list[str]:
        """The tables in the database."""
        with self.session(write=False) as store:
            return store.tables() if store else []

    def replace(
        self, spec: TableSpec, rows: DataFrame | HandedRows, positions: Positions, *,
        rows_at_most: int | None = None, bytes_at_most: int | None = None,
        guess: Guess | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Recreate the table from ``rows`` in one transaction; None if the ledger covers it.
        With ``guess``, the rows (a DataFrame, or ``HandedRows`` with ``__pos``) are staged as
        Arrow and written only if it holds."""
        data = row_columns(spec, rows.columns)
        if self._covered(spec.name, "replace", positions):
            return None
        if isinstance(rows, DataFrame) and POS not in rows.columns:
            rows = rows.withColumn(POS, F.lit(None).cast("string"))
        fields = [rows.schema[c] for c in [*data, POS]]
        schema = T.StructType(fields[:-1])
        if guess is not None:
            staging = self._guessed(rows, fields, guess)
        elif isinstance(rows, DataFrame):
            staging = self._staged(rows, fields, fits_arrow(rows_at_most, bytes_at_most))
        else:
            raise TypeError(f"{self.url}: rows handed over as Arrow come with a guess")
        with staging as staged, self.session(write=True) as store:
            assert store is not None
            source = f"SELECT {self._restore(fields)} FROM {staged(store.conn)}"
            columns = column_definitions(schema)
            entry = store.replace(spec, columns, source, positions, schema.json())
        return self._wrote(spec.name, entry)

    def merge(
        self, spec: TableSpec, changes: DataFrame, positions: Positions, *,
        rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply a change batch in one transaction; None if the ledger covers it."""
        data = change_columns(spec, changes.columns)
        if self._covered(spec.name, "merge", positions):
            return None
        fields = [changes.schema[c] for c in [*data, *META_COLUMNS]]
        schema = T.StructType(fields[: len(data)])
        staging = self._staged(changes, fields, fits_arrow(rows_at_most))
        with staging as staged, self.session(write=True) as store:
            assert store is not None
            source = f"SELECT {self._restore(fields)} FROM {staged(store.conn)}"
            entry = store.merge(spec, column_definitions(schema), source, positions, schema.json())
        return self._wrote(spec.name, entry)

    def read(self, table: str, version: int | None = None) -> DataFrame:
        """The current table as a Spark DataFrame (DuckDB keeps no older versions)."""
        with self.session(write=False) as store:
            if store is None:
                raise VersionUnavailableError(f"no table {table} in {self.url} (no such file)")
            return self._read(store, table, version)

    def _read(self, store: DuckDBStore, table: str, version: int | None) -> DataFrame:
        schema_json, latest = store.spark_schema(table), store.latest(table)
        if schema_json is None or latest is None:
            raise VersionUnavailableError(f"no table {table} in {self.url}")
        if version is not None and version != latest.version:
            raise VersionUnavailableError(
                f"DuckDB keeps only the current version ({latest.version}) of table {table};"
                f" version {version} is not available"
            )
        schema = T.StructType.fromJson(json.loads(schema_json))
        names = ", ".join(quote(f.name) for f in schema.fields)
        with self._scratch() as scratch:
            target = scratch / "table.parquet"
            store.conn.execute(
                f"COPY (SELECT {names} FROM {quote(table)}) TO {_literal(target)} (FORMAT parquet)"
            )
            raw = self.spark.read.parquet(str(target))
            cols = [F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields]
            # Materialised before the scratch files go: the result outlives them.
            return raw.select(*cols).localCheckpoint(eager=True)

    def close(self) -> None:
        """Nothing to release: the file is open only within a read or a write."""

    def _covered(self, table: str, mode: str, positions: Positions) -> bool:
        """Pre-check outside the transaction, so a retried batch is not even staged. A batch
        ahead of the entry this process last read or wrote (within ``PRECHECK_REUSE_S``) goes on
        without reading the ledger again: a ``--follow`` round reads it to plan, then writes,
        and opens the file once less. Anything else is decided by a fresh read."""
        known = self._known.get(table)
        if known is not None and time.monotonic() - known[0] < PRECHECK_REUSE_S:
            stored = known[1].positions if known[1] else {}
            ahead = [offset - stored.get(tp, -1) for tp, offset in positions.items()]
            if ahead and min(ahead) >= 0 and max(ahead) > 0:
                return False
        latest = self.latest(table)
        return plan_positions(table, mode, latest.positions if latest else None, positions) is None

    def _wrote(self, table: str, entry: LedgerEntry | None) -> LedgerEntry | None:
        """``entry``, now the table's newest (None: the ledger covered the batch, so what
        this process knew was stale)."""
        if entry is None:
            self._known.pop(table, None)
        else:
            self._known[table] = (time.monotonic(), entry)
        return entry

    @staticmethod
    def _restore(fields: Sequence[T.StructField]) -> str:
        return ", ".join(restored_column(f) for f in fields)

    @contextmanager
    def _staged(
        self, df: DataFrame, fields: Sequence[T.StructField], arrow: bool
    ) -> Iterator[Staged]:
        """Run ``df``'s job and stage ``fields`` of it, as one Arrow table if ``arrow``, else
        as Parquet files (see the module doc)."""
        columns = df.select(*staged_columns(fields))
        if arrow:
            yield _registered(columns.toArrow())
            return
        with self._scratch() as scratch:
            target = scratch / "batch"
            columns.write.parquet(str(target))
            yield lambda conn: f"read_parquet({_literal(target / '*.parquet')})"

    @contextmanager
    def _guessed(
        self, rows: DataFrame | HandedRows, fields: Sequence[T.StructField], guess: Guess
    ) -> Iterator[Staged]:
        """The rows' ``fields`` staged as one Arrow table if ``guess`` holds and they fit in
        ``guess_bytes`` (``guessed_rows``); else ``GuessFailedError``."""
        names, most = [f.name for f in fields], self.guess_bytes or 0
        yield _registered(staged_arrow(guessed_arrow(rows, names, guess, most, self.url), fields))

    @contextmanager
    def _scratch(self) -> Iterator[Path]:
        self.path.parent.mkdir(parents=True, exist_ok=True)  # a write's staging, or a read's copy
        scratch = Path(tempfile.mkdtemp(prefix=f".{self.path.name}-stage-", dir=self.path.parent))
        try:
            yield scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _registered(table: Any) -> Staged:
    """An Arrow table staged: registered with the write's connection under a name of its own."""
    name = f"__replicator_arrow_{next(_arrow_names)}"

    def registered(conn: Any) -> str:
        conn.register(name, table)
        return quote(name)

    return registered


def fits_arrow(rows_at_most: int | None, bytes_at_most: int | None = None) -> bool:
    """Whether a frame so bounded is handed to DuckDB as Arrow (``ARROW_ROWS``,
    ``ARROW_BYTES``)."""
    if rows_at_most is not None and rows_at_most <= ARROW_ROWS:
        return True
    return bytes_at_most is not None and bytes_at_most <= ARROW_BYTES


def _literal(path: Path) -> str:
    """``path`` as a DuckDB string literal."""
    return "'" + str(path).replace("'", "''") + "'"
