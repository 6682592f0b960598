"""The Delta Lake sink: one directory, a Delta table per subdirectory, positions in the commits.

Every write of a table is one Delta commit carrying (a) the Delta idempotent-write id
``txnAppId = replicator/<table>``, ``txnVersion = seq`` (the Delta version the write expects to
create, so it only grows), and (b) ``userMetadata`` JSON with ``seq``, the mode and the positions
the table now reflects. So the ledger *is* the table's commit history (read from the Delta log
without a Spark job by :mod:`replay.sinks.delta_log`): :meth:`history` lists it,
:meth:`positions` reads the latest entry, and :meth:`read` time-travels to any version.

Exactly-once: a write first reads the latest ledger entry and skips a batch it already covers;
the txn id additionally makes Delta itself drop the commit of a racing twin that planned the
same ``seq`` (Delta 4.4's MERGE honours the ``spark.databricks.delta.write.txnAppId/txnVersion``
session confs; the sink sets them, with the commit's ``userMetadata``, only around its own MERGE).

A batch is one MERGE of the table, or one overwrite of it where the table is small or changed
shape (:mod:`replay.sinks.delta_rewrite`: the MERGE's result, in one Spark job instead of ten).
Merges touch two tables, ``<table>__tombstones`` first and the table second, because Delta has no
multi-table transactions. That order is safe: tombstones are facts derived from the stream (a
delete's key and position, appended blind and read as the newest position per key:
:mod:`replay.sinks.delta_tombstones`), so a crash between the two commits only leaves tombstones
the retried batch re-derives anyway, while the table and its ledger stay at the previous entry
(for a replace or truncate, tombstones already cleared, which the retry clears again).
"""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable

from cdc.streams.protocol import TopicPartition
from replay.sinks import merge_rules as rules
from replay.sinks.delta_log import commit_versions, latest_version, read_ledger
from replay.sinks.delta_rewrite import (
    check_casts,
    merged_rows,
    rewrite_is_cheaper,
    rewrite_max_bytes,
    sink_merge,
)
from replay.sinks.delta_tombstones import DeltaTombstones
from replay.sinks.guessed_rows import GUESS_BYTES, guessed_arrow
from replay.sinks.ledger import (
    VersionUnavailableError,
    encode_metadata,
    plan_positions,
)
from replay.sinks.protocol import (
    META_COLUMNS,
    OP,
    OP_DELETE,
    OP_REJECTED,
    OP_UPSERT,
    POS,
    TRUNCATED,
    Guess,
    HandedRows,
    LedgerEntry,
    Positions,
    RejectedRecordsError,
    TableSpec,
)
from replay.spark import (
    Column,
    DataFrame,
    F,
    SparkSession,
    T,
    named_column,
    quoted_name,
    session_confs,
)

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class DeltaSink:
    """A :class:`~replay.sinks.protocol.Sink` writing Delta tables under the directory ``root``;
    a table of at most ``rewrite_bytes`` takes its batches as one rewrite, not a MERGE (0: never;
    by default ``$REPLICATOR_DELTA_REWRITE_BYTES`` or 4 MiB: :mod:`replay.sinks.delta_rewrite`)."""

    guess_bytes: int | None = GUESS_BYTES
    """A replace on a guess collects its rows into the driver, within this many bytes, before
    its own job writes them (``guessed_rows``)."""

    def __init__(
        self, root: str | Path, spark: SparkSession, *, rewrite_bytes: int | None = None
    ) -> None:
        self.root = Path(root).resolve()
        self.url = f"delta://{self.root}"
        self.spark = spark
        self.rewrite_bytes = rewrite_max_bytes() if rewrite_bytes is None else rewrite_bytes

    def positions(self, table: str) -> dict[TopicPartition, int]:
        """The positions the table reflects (empty if it does not exist)."""
        latest = read_ledger(table, self.root / table, latest_only=True)
        return dict(latest[0].entry.positions) if latest else {}

    def history(self, table: str) -> list[LedgerEntry]:
        """The table's ledger entries (its commits still in the Delta log), oldest first."""
        return [found.entry for found in read_ledger(table, self.root / table)]

    def tables(self) -> list[str]:
        """The Delta tables under the root directory (without the tombstone tables)."""
        if not self.root.is_dir():
            return []
        return sorted(
            d.name
            for d in self.root.iterdir()
            if (d / "_delta_log").is_dir() and not d.name.endswith(rules.TOMBSTONES_SUFFIX)
        )

    def replace(
        self, spec: TableSpec, rows: DataFrame | HandedRows, positions: Positions, *,
        rows_at_most: int | None = None, bytes_at_most: int | None = None,
        guess: Guess | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Overwrite the table with ``rows`` in one bulk write (no MERGE), clearing tombstones
        (a tombstone table that is not there yet is left to the first merge that has some).
        Spark writes the files whatever the frame's size: the bounds change nothing. With
        ``guess``, the rows (a DataFrame, or ``HandedRows`` with ``__pos``) are collected into
        the driver and written only if it holds (``guessed_rows``)."""
        data = rules.row_columns(spec, rows.columns)
        planned = self._plan(spec.name, "replace", positions)
        if planned is None:
            return None
        seq, meta, base = planned
        if isinstance(rows, DataFrame) and POS not in rows.columns:
            rows = rows.withColumn(POS, F.lit(None).cast("string"))
        if guess is not None:
            schema = T.StructType([rows.schema[c] for c in [*data, POS]])
            most = self.guess_bytes or 0  # (a guess comes only where ``guess_bytes``)
            table = guessed_arrow(rows, schema.fieldNames(), guess, most, self.url)
            rows = self.spark.createDataFrame(table, schema)
        elif not isinstance(rows, DataFrame):
            raise TypeError(f"{self.url}: rows handed over as Arrow come with a guess")
        rows = rows.select(*(named_column(c) for c in [*data, POS]))
        tombstones = self._tombstones(spec)
        if tombstones.exists():  # else none to clear (a first merge makes the table)
            empty = self.spark.createDataFrame(
                [], rows.select(*map(named_column, spec.primary_key), POS).schema
            )
            tombstones.replace(empty, meta)
        self._overwrite(spec.name, rows, meta, seq)
        return self._committed(spec.name, meta, base)

    def merge(
        self, spec: TableSpec, changes: DataFrame, positions: Positions, *,
        rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply a change batch: tombstones first, then one MERGE (or overwrite) of the table
        (Spark writes the files whatever the batch's size: ``rows_at_most`` changes nothing)."""
        data = rules.change_columns(spec, changes.columns)
        planned = self._plan(spec.name, "merge", positions)
        if planned is None:
            return None
        seq, meta, base = planned
        changes = changes.select(*(named_column(c) for c in [*data, *META_COLUMNS])).persist()
        try:
            stats = changes.agg(
                F.coalesce(F.max(F.col(TRUNCATED).cast("int")), F.lit(0)).alias("truncated"),
                F.count(F.when(F.col(OP) == OP_DELETE, 1)).alias("deletes"),
                F.count(F.when(F.col(OP) == OP_REJECTED, 1)).alias("rejected"),
            ).first()
            if stats and stats[2]:
                raise RejectedRecordsError(spec.name, int(stats[2]))
            truncated, deletes = (bool(stats[0]), int(stats[1])) if stats else (False, 0)
            deleted = changes.filter(F.col(OP) == OP_DELETE).select(
                *map(named_column, spec.primary_key), POS
            )
            tombstones = self._tombstones(spec)
            if truncated or not self._exists(spec.name):
                upserts = changes.filter(F.col(OP) == OP_UPSERT).select(
                    *map(named_column, [*data, POS])
                )
                tombstones.replace(deleted, meta)
                self._overwrite(spec.name, upserts, meta, seq)
            else:
                # A batch holds one change per key, so its upserts can only be older than the
                # deletes of earlier batches: with none remembered, the MERGE needs no join.
                remembered = tombstones.remembered()
                if deletes or not tombstones.exists():
                    tombstones.remember(deleted, meta)
                self._apply(spec, data, changes, meta, seq, remembered=remembered)
            return self._committed(spec.name, meta, base)
        finally:
            changes.unpersist()

    def read(self, table: str, version: int | None = None) -> DataFrame:
        """The table, or its Delta ``version`` (time travel), without meta columns."""
        if not self._exists(table):
            raise VersionUnavailableError(f"no table {table} in {self.url}")
        reader = self.spark.read.format("delta")
        if version is not None:
            if version not in commit_versions(self.root / table):
                raise VersionUnavailableError(f"table {table} has no version {version} in its log")
            reader = reader.option("versionAsOf", version)
        return reader.load(self._path(table)).drop(POS)

    def close(self) -> None:
        """Nothing to release: the SparkSession belongs to the caller."""

    def _tombstones(self, spec: TableSpec) -> DeltaTombstones:
        return DeltaTombstones(self.spark, self.root, spec)

    def _applicable(self, spec: TableSpec, changes: DataFrame) -> DataFrame:
        """The batch minus upserts older than their key's tombstone."""
        tombstones = self._tombstones(spec).newest()
        if tombstones is None:
            return changes
        return changes.join(tombstones, list(spec.primary_key), "left").filter(rules.NOT_TOMBSTONED)

    def _apply(
        self, spec: TableSpec, data: list[str], changes: DataFrame, meta: str, seq: int, *,
        remembered: bool,
    ) -> None:  # fmt: skip
        """Commit the batch to the existing table, minus upserts older than their key's
        tombstone (if any delete is ``remembered``: else joining the empty tombstone table costs
        ~0.25 s): one overwrite if its columns changed or it is small, else one MERGE."""
        source = self._applicable(spec, changes) if remembered else changes
        current = self.spark.read.format("delta").load(self._path(spec.name))
        wanted = [(f.name, f.dataType) for f in changes.select(*map(named_column, data)).schema]
        evolving = [(f.name, f.dataType) for f in current.drop(POS).schema] != wanted
        if evolving:
            check_casts(spec, current, wanted)
        if evolving or rewrite_is_cheaper(self.root / spec.name, self.rewrite_bytes):
            rows = merged_rows(spec, current, source, wanted)
            self._overwrite(spec.name, rows, meta, seq, keep_schema=not evolving)
            return
        merge = sink_merge(spec, [*data, POS])
        delete, update, insert = merge.clauses
        values: dict[str, str | Column] = {quoted_name(c): v for c, v in update.values}
        confs = {TXN_APP_ID: _app_id(spec.name), TXN_VERSION: str(seq), USER_METADATA: meta}
        with session_confs(self.spark, confs):
            (
                DeltaTable.forPath(self.spark, self._path(spec.name))
                .alias(merge.target_alias)
                .merge(source.alias(merge.source_alias), merge.on)
                .whenMatchedDelete(delete.condition)
                .whenMatchedUpdate(update.condition, values)
                .whenNotMatchedInsert(insert.condition or "true", values)
                .execute()
            )

    def _overwrite(
        self, table: str, df: DataFrame, meta: str, seq: int | None, *, keep_schema: bool = False
    ) -> None:
        writer = df.write.format("delta").mode("overwrite").option("userMetadata", meta)
        if not keep_schema:
            writer = writer.option("overwriteSchema", "true")
        if seq is not None:
            writer = writer.option("txnAppId", _app_id(table)).option("txnVersion", str(seq))
        writer.save(self._path(table))

    def _plan(self, table: str, mode: str, positions: Positions) -> tuple[int, str, int] | None:
        """``(seq, userMetadata, current Delta version)`` of the write; None if already covered.

        ``seq`` (the txnVersion) is the version the write expects to create: it grows with every
        commit, and stays monotonic even after log cleanup drops old ledger entries.
        """
        newest = latest_version(self.root / table)
        latest = read_ledger(table, self.root / table, latest_only=True)
        if mode == "merge" and newest is not None and not latest:
            raise VersionUnavailableError(
                f"table {table} has Delta commits but no replicator ledger entry in its log"
                " (not written by the sink, or its entries expired): replace it first"
            )
        record = plan_positions(
            table, mode, latest[0].entry.positions if latest else None, positions
        )
        if record is None:
            return None
        base = -1 if newest is None else newest
        return base + 1, encode_metadata(base + 1, mode, record), base

    def _committed(self, table: str, meta: str, base: int) -> LedgerEntry | None:
        """The entry this write (``meta``) committed after version ``base``; None if Delta
        skipped the write because a racing twin had committed the same txnVersion first."""
        latest = read_ledger(table, self.root / table, latest_only=True)
        if latest and latest[0].metadata == meta and latest[0].entry.version > base:
            return latest[0].entry
        return None

    def _exists(self, table: str) -> bool:
        return (self.root / table / "_delta_log").is_dir()

    def _path(self, table: str) -> str:
        return str(self.root / table)


def _app_id(table: str) -> str:
    return f"replicator/{table}"
