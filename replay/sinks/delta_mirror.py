"""The source mirror of a projection in a Delta sink: a RocksDB store on the driver, beside the
projection's Delta tables (``<stored>__source``, the name the DuckDB sink gives its mirror table).

A batch signs its changes against the mirror (as :meth:`~replay.sinks.sql_projection.MirrorSql.
signed_sql` does in SQL: ``-old`` for the mirror's live row, ``+new`` for an upsert, a change at
or below the stored ``__pos`` a duplicate; deletes leave tombstones) and brings the mirror to the
batch in **one synced write batch** that also holds the batch's ``seq`` and its undo record (the
previous row of every key it touched; before a truncate, the whole mirror). The Delta store
writes it just before the master's ledger commit of that ``seq``, so after a crash the mirror
is at most one batch ahead of the master, and :meth:`DeltaMirror.rewind` brings it back with the
undo record. Out of Delta, the mirror costs no Delta commit per batch (its snapshot, file listing
and log write were a third of a ``--follow`` round).

Rows: the primary key as JSON (text of non-JSON values, so one column's values never collide)
-> a pickle of ``(__pos, deleted, values)``. The directory is locked while a batch runs, so
followers of one projection take turns.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.state.errors import StateStoreBusyError, StateStoreError
from cdc.state.rocks_store import RocksStateStore
from projections.signed_rows import SIGN
from replay.driver_frames import local_frame
from replay.sinks.delta_log import read_ledger
from replay.sinks.protocol import OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS
from replay.sinks.sql_projection import DELETED, MirrorSql
from replay.spark import SparkSession, T

_ROWS, _UNDO, _META = "rows", "undo", "meta"
_SEQ, _PRIOR, _WHOLE = b"seq", b"prior", b"whole"
_ABSENT = b""  # in the undo record: the key had no row before the batch
_BUSY_WAIT_S = 120.0
_SPREAD_ROWS = 10_000  # signed rows handed to Spark as partitions, not as a local relation
SIGNED_VIEW = "__projection_signed"


class MirrorOutOfStepError(StateStoreError):
    """The mirror is not at its projection's last batch and cannot be brought back to it."""


@dataclass
class SignedChanges:
    """A batch signed against the mirror: its signed rows (the mirror's columns, then the sign)
    and what it writes to the mirror."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    writes: dict[bytes, bytes] = field(default_factory=dict)
    undo: dict[bytes, bytes] = field(default_factory=dict)
    truncated: bool = False


def _key(values: Sequence[Any]) -> bytes:
    return json.dumps(list(values), default=str, separators=(",", ":")).encode("utf-8")


def _seq(raw: bytes | None) -> int | None:
    return None if not raw else int.from_bytes(raw, "big")


def _raw(seq: int | None) -> bytes:
    return b"" if seq is None else seq.to_bytes(8, "big")


class DeltaMirror:
    """The mirror at ``path`` of a source table whose first ``keys`` columns are its primary
    key; opening waits up to ``wait_s`` for another process's batch to end."""

    def __init__(self, path: Path, keys: int, *, wait_s: float = _BUSY_WAIT_S) -> None:
        self.path, self.keys = path, keys
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.store = RocksStateStore(str(path))
                break
            except StateStoreBusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def __enter__(self) -> DeltaMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def seq(self) -> int | None:
        """The seq of the last batch the mirror holds (None: none)."""
        return _seq(self.store.get(_META, _SEQ))

    def wipe(self) -> None:
        """Empty the mirror (its projection has no batch)."""
        self.store.wipe()

    def rewind(self, seq: int) -> None:
        """Bring the mirror to batch ``seq``, the master's last ledger entry: undo its last batch
        when that is the one after ``seq`` (a crash before the master committed it)."""
        held = self.seq()
        if held == seq:
            return
        prior = _seq(self.store.get(_META, _PRIOR))
        if held is None or held < seq or prior != seq:
            raise MirrorOutOfStepError(
                f"the source mirror at {self.path} holds batch {held}, its projection batch "
                f"{seq}: the mirror was changed outside the replicator; rebuild the projection "
                "(`replicator project ... --rebuild`: a new version beside it, then the swap)"
            )
        whole = self.store.get(_META, _WHOLE) == b"1"
        undo = {k: (None if v == _ABSENT else v) for k, v in self.store.scan(_UNDO)}
        cleared = {_UNDO, _ROWS} if whole else {_UNDO}
        meta = {_SEQ: _raw(seq), _PRIOR: None, _WHOLE: None}
        self.store.apply({_ROWS: undo, _META: meta}, {}, frozenset(cleared))

    def sign(
        self, changes: Iterable[tuple[str, str | None, Sequence[Any]]], truncated: bool
    ) -> SignedChanges:
        """Sign ``changes`` (``__op``, ``__pos``, the mirror's columns, keys first), one per key,
        after clearing the mirror when ``truncated``; nothing is written yet."""
        out = SignedChanges(truncated=truncated)
        if truncated:
            out.undo = dict(self.store.scan(_ROWS))
        for op, pos, values in changes:
            if op == OP_TRUNCATE:
                continue
            key = _key(values[: self.keys])
            raw = out.writes.get(key) if key in out.writes else self._before(key, truncated)
            if raw is not None:
                old_pos, deleted, old = pickle.loads(raw)
                if pos is None or (old_pos is not None and pos <= old_pos):
                    continue  # a duplicate: the mirror has this change or a newer one
                if not deleted:
                    out.rows.append((*old, -1))
            if op == OP_UPSERT:
                out.rows.append((*values, 1))
            if not truncated and key not in out.undo:
                out.undo[key] = _ABSENT if raw is None else raw
            out.writes[key] = pickle.dumps((pos, op == OP_DELETE, tuple(values)), protocol=5)
        return out

    def _before(self, key: bytes, truncated: bool) -> bytes | None:
        return None if truncated else self.store.get(_ROWS, key)

    def apply(self, signed: SignedChanges, seq: int) -> None:
        """Write the signed batch's rows and its undo record as batch ``seq``, synced."""
        meta = {
            _SEQ: _raw(seq),
            _PRIOR: _raw(self.seq()),
            _WHOLE: b"1" if signed.truncated else b"0",
        }
        cleared = {_UNDO, _ROWS} if signed.truncated else {_UNDO}
        writes: dict[str, Mapping[bytes, bytes | None]]
        writes = {_ROWS: signed.writes, _UNDO: signed.undo, _META: meta}
        self.store.apply(writes, {}, frozenset(cleared))

    def load(self, column: dict[str, list[Any]], names: Sequence[str], seq: int) -> None:
        """Fill an empty mirror with rows (``names``, ``__pos``, ``__deleted``) as batch ``seq``."""
        rows = zip(*(column[c] for c in names), column[POS], column[DELETED], strict=True)
        writes: dict[bytes, bytes] = {}
        for *values, pos, deleted in rows:
            writes[_key(values[: self.keys])] = pickle.dumps((pos, deleted, tuple(values)), 5)
        self.store.apply({_ROWS: writes, _META: {_SEQ: _raw(seq)}}, {})


def open_mirror(spark: SparkSession, root: Path, master: str, mirror: MirrorSql) -> DeltaMirror:
    """The mirror of the projection stored in ``root / master``; one kept as a Delta table
    (before 2026-12) is moved into RocksDB first, as of the master's last batch (dropped when
    the master has none)."""
    path, master_dir = root / mirror.table, root / master
    legacy, staged = path.with_name(path.name + ".delta"), path.with_name(path.name + ".moving")
    if legacy.is_dir() and path.exists():  # moved, but not cleaned up
        shutil.rmtree(legacy)
    elif legacy.is_dir():  # a move cut short: start it again
        os.replace(legacy, path)
    if (path / "_delta_log").is_dir():
        shutil.rmtree(staged, ignore_errors=True)
        latest = read_ledger(master, master_dir, latest_only=True)
        kept = latest and read_ledger(
            mirror.table, path, latest_only=True, seq_at_most=latest[0].seq
        )
        if kept:
            version = kept[-1].entry.version
            rows = spark.read.format("delta").option("versionAsOf", version).load(str(path))
            with DeltaMirror(staged, len(mirror.keys)) as moved:
                moved.load(rows.toArrow().to_pydict(), mirror.all_columns, latest[0].seq)
        os.replace(path, legacy)
        if staged.exists():
            os.replace(staged, path)
        shutil.rmtree(legacy)
    return DeltaMirror(path, len(mirror.keys))


def register_signed_rows(
    spark: SparkSession, mirror: MirrorSql, schema: T.StructType, arrow: Any,
    rows: list[tuple[Any, ...]],
) -> None:  # fmt: skip
    """Register the signed rows (``SignedChanges.rows``) of a batch of ``schema`` (whose
    ``toArrow`` table had the schema ``arrow``) as the view ``SIGNED_VIEW``."""
    fields = [schema[c] for c in mirror.all_columns]
    struct = T.StructType([*fields, T.StructField(SIGN, T.IntegerType(), False)])
    types = [*(arrow.field(c).type for c in mirror.all_columns), None]
    spread = spark.sparkContext.defaultParallelism if len(rows) > _SPREAD_ROWS else 0
    frame = local_frame(spark, rows, struct, types=types, spread=spread)
    frame.createOrReplaceTempView(SIGNED_VIEW)
