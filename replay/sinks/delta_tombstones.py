"""A Delta table's remembered deletes (``<table>__tombstones``): appended blind, read folded.

A tombstone is a fact derived from the stream: key ``k`` was deleted at position ``p``. What the
table's MERGE needs is the newest such position per key, so the tombstone table may hold any
number of rows per key and is read folded (``max(__pos)`` per key). Remembering a batch's deletes
is then one blind append (no scan of the tombstones, no join: ~0.4 s where a max-position MERGE
took 1.3-1.6 s of a 30,000-change round, ``bench/README.md``), and a retried batch that appends
the same deletes again changes nothing a reader sees. Once the table holds more than
``FOLD_AFTER_FILES`` data files it is rewritten folded, one row per key, in one overwrite commit.

None of these commits carries a txn id (a retry may be batched differently: Delta must not skip
its tombstones); each carries the batch's ``userMetadata``.
"""

from __future__ import annotations

from pathlib import Path

from replay.sinks import merge_rules as rules
from replay.sinks.delta_log import data_file_count
from replay.sinks.delta_rewrite import uncastable
from replay.sinks.protocol import POS, TableSpec
from replay.spark import DataFrame, F, SparkSession, named_column

FOLD_AFTER_FILES = 16
"""Appends (one data file each) after which the tombstone table is rewritten one row per key."""


class DeltaTombstones:
    """The tombstone table of one table spec under a Delta sink's root directory."""

    def __init__(self, spark: SparkSession, root: Path, spec: TableSpec) -> None:
        self.spark, self.spec = spark, spec
        self.dir = root / rules.tombstones_table(spec.name)
        self.path = str(self.dir)

    def exists(self) -> bool:
        return (self.dir / "_delta_log").is_dir()

    def remembered(self) -> bool:
        """Whether any delete is remembered (an absent table, or one whose file count is not
        known, counts as remembering)."""
        return data_file_count(self.dir) != 0

    def replace(self, deleted: DataFrame, meta: str) -> None:
        """Make ``deleted`` (key columns and ``__pos``, one row per key) the only tombstones."""
        self._write(deleted.coalesce(1), "overwrite", meta)

    def remember(self, deleted: DataFrame, meta: str) -> None:
        """Add a batch's deletes (key columns and ``__pos``); fold the table when it has grown."""
        if not self.exists():
            self.replace(deleted, meta)
            return
        stored = self._stored()
        if _shape(stored) != _shape(deleted):
            if not self._keyed_alike(stored):  # the primary key changed: the old facts are moot
                self.replace(deleted, meta)
                return
            # A key column retyped: the stored facts folded into the new types. A key the new
            # type cannot hold (narrowed) can never match a row again: its tombstone goes.
            lost = F.lit(False)
            for field in deleted.schema:
                lost |= uncastable(field.name, field.dataType)
            kept = stored.where(~lost).select(
                *(named_column(f.name).cast(f.dataType).alias(f.name) for f in deleted.schema)
            )
            self.replace(self._folded(kept.unionByName(deleted), POS), meta)
            return
        self._write(deleted.coalesce(1), "append", meta)
        files = data_file_count(self.dir)
        if files is not None and files > FOLD_AFTER_FILES:
            self.replace(self._folded(self._stored(), POS), meta)

    def newest(self) -> DataFrame | None:
        """The newest delete position per key, as key columns and ``__tombstone_pos``; None
        when the stored tombstones are keyed by other columns (the primary key changed: until
        the next delete replaces them, no stored fact applies)."""
        stored = self._stored()
        return self._folded(stored, rules.TOMBSTONE_POS) if self._keyed_alike(stored) else None

    def _keyed_alike(self, stored: DataFrame) -> bool:
        return sorted(stored.columns) == sorted([*self.spec.primary_key, POS])

    def _stored(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def _folded(self, tombstones: DataFrame, position: str) -> DataFrame:
        keys = [named_column(k) for k in self.spec.primary_key]
        return tombstones.groupBy(*keys).agg(F.max(POS).alias(position))

    def _write(self, frame: DataFrame, mode: str, meta: str) -> None:
        writer = frame.write.format("delta").mode(mode).option("userMetadata", meta)
        if mode == "overwrite":
            writer = writer.option("overwriteSchema", "true")
        writer.save(self.path)


def _shape(frame: DataFrame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
