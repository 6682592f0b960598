"""Projections in a Delta sink: Spark SQL statements of the plan on path tables, exactly once.

A projection version owns a **master** table (its stored table, the one readers' view reads),
**auxiliary** tables (the MIN/MAX multisets) and its source mirror, kept out of Delta
(:mod:`replay.sinks.delta_mirror`). Delta has no multi-table transactions, so a batch is
several commits; exactly-once comes from these rules:

- the batch's statements run in the plan's order, the master's MERGE **last**; only that MERGE
  carries the ledger (``userMetadata``: seq, positions) and the idempotent-write id
  (``txnAppId = replicator-projection/<table>``, ``txnVersion = seq``), like the Delta sink;
- every auxiliary commit carries the batch's ``seq`` in its ``userMetadata`` too, and so does
  the mirror's write, just before the master's; commits of the master without metadata (its
  creation) are never ledger entries; a batch with a truncate overwrites the master instead of
  merging into it (``INSERT OVERWRITE``: the reset and the batch in that one commit, so readers
  never see the master emptied without its ledger entry);
- before each batch, :meth:`DeltaProjectionStore.recover` restores (Delta ``RESTORE``) the master
  to its latest ledger entry and each auxiliary table to its newest commit with a ``seq`` not
  above the master's, dropping tables that have none, and the mirror undoes a batch the master
  did not commit. A crash between two statements thus rewinds every table to the end of the
  last committed batch, and the batch is redone from the master's positions (re-cut freely:
  nothing of it survived). A restore commit carries the metadata of the version it restores,
  so the ledger reads the same after it.

A MERGE into a table of at most the sink's ``rewrite_bytes`` is written as one overwrite of the
MERGE's result instead (:meth:`DeltaProjectionStore.write`): a ``WRITE`` commit where the MERGE
made a ``MERGE`` one, under the same session confs, so with the same metadata and txn id. It
commits even when the MERGE would have changed nothing (the master's empty append, below, is
then not needed).

The batch is signed on the driver against the mirror; the signed rows go to Spark as Arrow.
Restores need the files of the restored versions: do not ``VACUUM`` a projection's tables below
the time a crash recovery might need (Delta's default retention, 7 days, is plenty).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from typing import Any

from cdc.runtime.record_heap import cycle_collector_paused
from cdc.streams.protocol import TopicPartition
from projections import IncrementalPlan
from projections.sql.merge_parts import merge_parts
from projections.sql.syntax import SPARK
from replay.sinks.delta_log import latest_version, read_ledger
from replay.sinks.delta_mirror import SIGNED_VIEW, open_mirror, register_signed_rows
from replay.sinks.delta_rewrite import merge_result, rewrite_is_cheaper, sets_only
from replay.sinks.delta_sink import (
    TXN_APP_ID,
    TXN_VERSION,
    USER_METADATA,
    DeltaSink,
)
from replay.sinks.ledger import encode_metadata, plan_positions
from replay.sinks.protocol import (
    OP,
    OP_DELETE,
    OP_REJECTED,
    OP_UPSERT,
    POS,
    TRUNCATED,
    LedgerEntry,
    Positions,
    RejectedRecordsError,
)
from replay.sinks.sql_projection import MirrorSql
from replay.spark import DataFrame, quoted_name, session_confs

REGISTRY_DIR = "_replicator_projections"
_ROWS = "__projection_rows"


class DeltaProjectionStore:
    """Runs projection batches, blue/green swaps and reads on a :class:`DeltaSink`."""

    dialect = SPARK
    batch_on_driver = True  # signed against the RocksDB mirror in Python

    def __init__(self, sink: DeltaSink) -> None:
        self.sink, self.spark, self.root = sink, sink.spark, sink.root

    def positions(self, table: str) -> dict[TopicPartition, int]:
        """The positions the projection stored in ``table`` reflects (its master's ledger)."""
        return self.sink.positions(table)

    def sql(self, statement: str, tables: Sequence[str]) -> DataFrame:
        """Run a Spark statement naming ``tables`` as plain identifiers on their Delta paths."""
        for table in sorted(tables, key=len, reverse=True):
            path = str(self.root / table).replace("`", "``")
            statement = statement.replace(quoted_name(table), f"delta.`{path}`")
        return self.spark.sql(statement)

    def write(self, statement: str, tables: Sequence[str]) -> None:
        """Run a statement that writes a table: a MERGE into a small table (the Delta sink's
        bound, :mod:`replay.sinks.delta_rewrite`) as one overwrite of the MERGE's result."""
        parts = merge_parts(statement, SPARK) if statement.startswith("MERGE") else None
        bound = self.sink.rewrite_bytes
        if parts is not None and rewrite_is_cheaper(self.root / parts.target, bound):
            path = str(self.root / parts.target)
            target = self.spark.read.format("delta").load(path)
            if sets_only(parts, target.columns):
                rows = merge_result(parts, target, self.sql(parts.source, tables))
                rows.write.format("delta").mode("overwrite").save(path)
                return
        self.sql(statement, tables)

    def recover(self, master: str, auxiliary: Sequence[str]) -> int | None:
        """Rewind the Delta tables of a projection version to its last committed batch (module
        doc); its seq, None when it has none (then the tables are dropped)."""
        entries = read_ledger(master, self.root / master, latest_only=True)
        if not entries:
            for table in (master, *auxiliary):
                shutil.rmtree(self.root / table, ignore_errors=True)
            return None
        latest = entries[0]
        if (latest_version(self.root / master) or 0) > latest.entry.version:
            self._restore(master, latest.entry.version, latest.metadata)
        for table in auxiliary:
            # read back from the newest commit: not every commit of a log a follower grows
            kept = read_ledger(table, self.root / table, latest_only=True, seq_at_most=latest.seq)
            if not kept:
                shutil.rmtree(self.root / table, ignore_errors=True)
            elif (latest_version(self.root / table) or 0) > kept[-1].entry.version:
                self._restore(table, kept[-1].entry.version, kept[-1].metadata)
        return latest.seq

    def _has_commit(self, table: str) -> bool:
        """Whether ``table`` has a commit (a log directory alone may be a crashed creation)."""
        return latest_version(self.root / table) is not None

    def _restore(self, table: str, version: int, metadata: str) -> None:
        with session_confs(self.spark, {USER_METADATA: metadata}):
            self.sql(f"RESTORE TABLE {quoted_name(table)} TO VERSION AS OF {version}", [table])

    def _plan(self, table: str, positions: Positions) -> tuple[int, str] | None:
        latest = read_ledger(table, self.root / table, latest_only=True)
        stored = latest[0].entry.positions if latest else None
        record = plan_positions(table, "merge", stored, positions)
        if record is None:
            return None
        newest = latest_version(self.root / table)
        seq = (-1 if newest is None else newest) + 1
        return seq, encode_metadata(seq, "merge", record)

    def _committed(self, table: str, meta: str) -> LedgerEntry | None:
        latest = read_ledger(table, self.root / table, latest_only=True)
        return latest[0].entry if latest and latest[0].metadata == meta else None

    def apply_sql(
        self, plan: IncrementalPlan, mirror: MirrorSql, batch: DataFrame, positions: Positions,
        *, rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply one batch (``batch_changes`` columns) to a SQL projection (module doc); a
        batch with records marked bad (``__op`` ``x``) raises ``RejectedRecordsError`` first."""
        auxiliary = list(plan.value_tables.values())
        tables = [plan.table, *auxiliary]
        with open_mirror(self.spark, self.root, plan.table, mirror) as source:
            latest = self.recover(plan.table, auxiliary)
            if latest is None:
                source.wipe()
            else:
                source.rewind(latest)
            planned = self._plan(plan.table, positions)
            if planned is None:
                return None
            seq, meta = planned
            arrow = batch.toArrow()
            with cycle_collector_paused():  # many values held (cdc.runtime.record_heap)
                column = {name: arrow.column(name).to_pylist() for name in arrow.column_names}
                rejected = column[OP].count(OP_REJECTED)
                if rejected:
                    raise RejectedRecordsError(plan.table, rejected)
                values = zip(*(column[c] for c in mirror.all_columns), strict=True)
                changes = zip(column[OP], column[POS], values, strict=True)
                signed = source.sign(changes, any(column[TRUNCATED]))
                del column, values, changes
                register_signed_rows(self.spark, mirror, batch.schema, arrow.schema, signed.rows)
            *value_merges, master = plan.apply_statements(SIGNED_VIEW, SPARK)
            self._apply_plan(plan, tables, value_merges, signed.truncated, meta)
            source.apply(signed, seq)  # synced, just before the ledger commit (module doc)
            if signed.truncated:  # the master's reset and merge in its one ledger commit
                master = plan.overwrite_statement(SIGNED_VIEW, SPARK)
            self._commit_master(plan.table, master, tables, seq, meta)
        return self._committed(plan.table, meta)

    def _apply_plan(
        self, plan: IncrementalPlan, tables: Sequence[str], value_merges: Sequence[str],
        truncated: bool, meta: str,
    ) -> None:  # fmt: skip
        """Every statement of the plan but the master's ledger MERGE (``value_merges``: the
        plan's merges before it), in the plan's order."""

        def run(statement: str) -> None:
            self.write(statement, tables)

        with session_confs(self.spark, {USER_METADATA: meta}):
            *values, master = plan.create_statements(SIGNED_VIEW, SPARK)
            for statement in values:
                run(statement)
        if not self._has_commit(plan.table):
            run(master)  # no metadata: the master's creation is not a ledger entry
        with session_confs(self.spark, {USER_METADATA: meta}):
            resets = plan.reset_statements(SPARK)[1:] if truncated else []
            for statement in [*resets, *value_merges]:
                run(statement)

    def _commit_master(
        self, table: str, statement: str, tables: Sequence[str], seq: int, meta: str
    ) -> None:
        app = f"replicator-projection/{table}"
        confs = {USER_METADATA: meta, TXN_APP_ID: app, TXN_VERSION: str(seq)}
        with session_confs(self.spark, confs):
            self.write(statement, tables)
        if self._committed(table, meta) is None:
            # Delta writes no commit for a MERGE that changes nothing: record the positions
            # with an empty append (one commit, same id and metadata; Delta skips it too when a
            # racing twin already committed this txnVersion).
            with session_confs(self.spark, confs):
                quoted = quoted_name(table)
                self.sql(f"INSERT INTO {quoted} SELECT * FROM {quoted} LIMIT 0", [table])

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
        """Delete every ``identity`` of ``rows`` and upsert those with ``__op`` ``u`` (after
        clearing the table when ``truncated``): one MERGE (an overwrite when ``truncated``)
        carrying the ledger entry."""
        self.recover(table, [])
        planned = self._plan(table, positions)
        if planned is None:
            return None
        seq, meta = planned
        rows.localCheckpoint(eager=True).createOrReplaceTempView(_ROWS)
        columns = [c for c in rows.columns if c != OP]
        names = ", ".join(quoted_name(c) for c in columns)

        def run(statement: str) -> None:
            self.write(statement, [table])

        run(f"CREATE TABLE IF NOT EXISTS {quoted_name(table)} USING DELTA AS SELECT {names} "
            f"FROM {_ROWS} LIMIT 0")  # fmt: skip
        if truncated:  # cleared and written in the one ledger commit (module doc)
            overwrite = (f"INSERT OVERWRITE TABLE {quoted_name(table)} SELECT {names} FROM {_ROWS} "
                         f"WHERE {OP} = '{OP_UPSERT}'")  # fmt: skip
            self._commit_master(table, overwrite, [table], seq, meta)
            return self._committed(table, meta)
        same = " AND ".join(f"t.{quoted_name(k)} <=> s.{quoted_name(k)}" for k in identity)
        sets = ", ".join(f"{quoted_name(c)} = s.{quoted_name(c)}" for c in columns)
        values = ", ".join(f"s.{quoted_name(c)}" for c in columns)
        merge = (
            f"MERGE INTO {quoted_name(table)} AS t USING {_ROWS} AS s ON {same} "
            f"WHEN MATCHED AND s.{OP} = '{OP_DELETE}' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED AND s.{OP} = '{OP_UPSERT}' THEN INSERT ({names}) VALUES ({values})"
        )
        self._commit_master(table, merge, [table], seq, meta)
        return self._committed(table, meta)

    def load_state(self, name: str) -> str | None:
        """The blue/green state (JSON) of projection ``name``, None if it has none."""
        path = self.root / REGISTRY_DIR / f"{name}.json"
        return path.read_text(encoding="utf-8") if path.exists() else None

    def save_state(self, name: str, state: str, statements: Sequence[str] = ()) -> None:
        """Store ``state`` by an atomic file rename: readers resolve the served version from it
        (the swap). ``statements`` are drops of retired versions' tables, run after."""
        folder = self.root / REGISTRY_DIR
        folder.mkdir(parents=True, exist_ok=True)
        staged = folder / f".{name}.json.tmp"
        staged.write_text(state, encoding="utf-8")
        os.replace(staged, folder / f"{name}.json")
        for statement in statements:
            dropped = re.fullmatch(r"DROP TABLE IF EXISTS `(.+)`", statement)
            if dropped:
                shutil.rmtree(self.root / dropped.group(1).replace("``", "`"), ignore_errors=True)

    def query(self, select: str, tables: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """The rows of a Spark SQL query over ``tables``."""
        return [tuple(r) for r in self.sql(select, tables).collect()]

    def frame(self, select: str, tables: Sequence[str] = ()) -> DataFrame:
        """A Spark SQL query over ``tables`` as a DataFrame."""
        return self.sql(select, tables)

    def drop(self, tables: Sequence[str]) -> None:
        """Delete ``tables`` (a fresh rebuild of a version)."""
        for table in tables:
            shutil.rmtree(self.root / table, ignore_errors=True)
