"""SCD and Python projections run by the projection engine: folded on the driver, written as
row deltas (upserts and deletes by identity) in the sink transaction of their ledger entry.

Each batch's decoded changes (every change, not only the newest per key: an SCD type 2 history
needs them all) are ordered by source position. The source table is mirrored in memory (primary
key -> last image and position) so that a change reaches the fold with its before image, a
re-delivered change (position at or below the mirror's) is dropped, and the deletes our changelog
writes after a truncate, in its transaction (one per row it cleared), do not reach the
projection again.

Changes are ordered by source position within a batch only; batches are cut by offsets per
partition. A truncate without a sequence is placed by arrival (at the highest sequence seen), so
with ``sequence_by`` and several partitions its place among other partitions' changes depends on
the batch cut: give such projections a one-partition topic, or truncate-free sources.

The executors keep their state in memory (an SCD type 2 key keeps its whole history, so that a
late change can be placed); the engine rebuilds it on start by folding the topic from its start
up to the projection's ledger with ``rebuilding`` set, and writes nothing while doing so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from projections import (
    END_AT,
    START_AT,
    PythonProjection,
    PythonProjectionExecutor,
    ScdExecutor,
    ScdSpec,
    scd_changes,
)
from projections.change_ops import CREATE, DELETE, TRUNCATE, UPDATE, Row
from replay.decode.changes import TXN
from replay.sinks.protocol import OP, OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS
from replay.spark import DataFrame, SparkSession, T

MemoryDefinition = ScdSpec | PythonProjection


@dataclass(frozen=True, slots=True)
class PositionedChange:
    """A change with its images and source position (what the projections' executors read)."""

    op: str
    before: Row | None
    after: Row | None
    pos: str

    def position(self) -> str:
        return self.pos


@dataclass
class RowsDelta:
    """What a batch did to the projection's table: rows to upsert, identities to delete, and
    whether the table is cleared first."""

    upserts: list[Row] = field(default_factory=list)
    deletes: list[Row] = field(default_factory=list)
    truncated: bool = False


class MemoryProjection:
    """An SCD or Python projection over a source table keyed by ``source_key``."""

    def __init__(self, definition: MemoryDefinition, source_key: tuple[str, ...]) -> None:
        self.definition, self.source_key = definition, source_key
        self._mirror: dict[tuple[Any, ...], tuple[str, Row | None]] = {}
        self._truncate_txn: Any = None
        self._scd = ScdExecutor(definition) if isinstance(definition, ScdSpec) else None
        self._fold = (
            PythonProjectionExecutor(definition)
            if isinstance(definition, PythonProjection)
            else None
        )

    @property
    def identity(self) -> tuple[str, ...]:
        """The columns identifying a row of the table (SCD type 2: the key and ``__start_at``)."""
        if isinstance(self.definition, ScdSpec):
            keys = tuple(self.definition.keys)
            return (*keys, START_AT) if self.definition.stored_as == 2 else keys
        return tuple(self.definition.key)

    def apply(self, decoded: Iterable[Row], *, rebuilding: bool) -> RowsDelta:
        """Fold decoded change rows (table columns, ``__op``, ``__pos``, ``__txn``), in
        position order."""
        changes = list(self._changes(decoded))
        if self._scd is not None:
            assert isinstance(self.definition, ScdSpec)
            delta = self._scd.apply(scd_changes(self.definition, changes))
            deletes = [dict(zip(self.identity, key, strict=True)) for key in delta.deletes]
            return RowsDelta(delta.upserts, deletes)
        assert self._fold is not None
        result = self._fold.apply(changes, rebuilding=rebuilding)
        deletes = [dict(zip(self.identity, key, strict=True)) for key in result.deletes]
        return RowsDelta(list(result.upserts.values()), deletes, result.truncated)

    def _changes(self, decoded: Iterable[Row]) -> Iterator[PositionedChange]:
        for row in decoded:
            op, pos = row[OP], row[POS]
            if op == OP_TRUNCATE:
                self._truncate_txn = row.get(TXN)
                self._mirror.clear()
                yield PositionedChange(TRUNCATE, None, None, pos)
                continue
            image = {k: v for k, v in row.items() if not k.startswith("__")}
            key = tuple(image[k] for k in self.source_key)
            stored = self._mirror.get(key)
            if stored is not None and pos <= stored[0]:
                continue  # a re-delivered or stale change
            before = stored[1] if stored is not None else None
            if op == OP_UPSERT:
                self._mirror[key] = (pos, image)
                yield PositionedChange(UPDATE if before else CREATE, before, image, pos)
            elif op == OP_DELETE and (row.get(TXN) is None or row.get(TXN) != self._truncate_txn):
                self._mirror[key] = (pos, None)
                if self._scd is not None:  # the event's own image: its sequence, late or not
                    yield PositionedChange(DELETE, image, None, pos)
                elif before is not None:
                    yield PositionedChange(DELETE, before, None, pos)


def memory_schema(definition: MemoryDefinition, source: T.StructType, row_schema: str | None,
                  spark: SparkSession) -> T.StructType:  # fmt: skip
    """The Spark schema of the projection's table: SCD columns from the source's (plus
    ``__start_at``/``__end_at``), a Python projection's from ``row_schema`` (Spark DDL)."""
    if isinstance(definition, PythonProjection):
        if not row_schema:
            raise ValueError(f"python projection {definition.name} needs row_schema (Spark DDL)")
        return spark.createDataFrame([], row_schema).schema
    types = {f.name: f.dataType for f in source.fields if not f.name.startswith("__")}
    kept = definition.project(dict.fromkeys(types))
    fields = [T.StructField(name, types[name], True) for name in kept]
    if definition.stored_as == 2:
        sequence = types[definition.sequence_by] if definition.sequence_by else T.StringType()
        fields += [T.StructField(START_AT, sequence, True), T.StructField(END_AT, sequence, True)]
    return T.StructType(fields)


def delta_frame(spark: SparkSession, schema: T.StructType, delta: RowsDelta) -> DataFrame:
    """The delta as rows of ``schema`` plus ``__op`` (``u`` upserts, ``d`` deleted identities)."""
    names = [f.name for f in schema.fields]
    rows = [(*(r.get(n) for n in names), OP_UPSERT) for r in delta.upserts]
    rows += [(*(r.get(n) for n in names), OP_DELETE) for r in delta.deletes]
    with_op = T.StructType([*schema.fields, T.StructField(OP, T.StringType(), False)])
    return spark.createDataFrame(rows, with_op)
