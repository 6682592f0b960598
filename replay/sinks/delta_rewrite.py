"""A change batch applied to a Delta table by rewriting the table in one overwrite commit, not by
Delta's MERGE: when the batch changes the table's shape, and when the table is small.

A MERGE cannot retype or drop a column, nor fill an added column's existing rows with the
column's default, so a batch whose columns differ from the table's is applied in Spark over the
table's rows brought to the new columns: kept columns cast (widened) to their new type, added
ones filled with ``TableSpec.defaults`` or NULL, dropped ones gone (once per schema change).

A small table is rewritten too. Without deletion vectors a MERGE is copy-on-write: it rewrites
every data file holding a key of the batch, and a table of a file or two has every file touched
by every batch. Delta's MERGE gets there in about ten Spark jobs (it materialises the source,
scans the files for matches, then joins again to rewrite them), each planned on the driver;
the same rows as one full outer join written by one overwrite cost one job: 20-25% less per
``--follow`` round here (``bench/README.md``). A rewrite costs the whole table where a MERGE of
new keys only appends them, hence the bound ``REWRITE_MAX_BYTES``; and a table whose readers
rely on row-level history an overwrite would not keep (change data feed, row tracking,
deletion vectors), or a partitioned one, is always MERGEd.

A projection's MERGE statements into small tables (the plans' stored tables, MIN/MAX multisets
and source mirrors) are rewritten the same way: :func:`merge_result` applies the clauses of the
statement taken apart by :mod:`projections.sql.merge_parts`.

Either way the result is the MERGE's, clause for clause (``merge_rules``, with ``t`` the table
and ``s`` the batch): a matched row is deleted under ``DELETE_WHEN``, replaced under
``UPDATE_WHEN`` and kept otherwise; an unmatched change is inserted under ``INSERT_WHEN``; keys
match by ``=`` as in the sink's MERGE condition (a projection's statements: by their own
``ON``). Each commit carries the write's ledger entry and txn id, like any other write, and
readers see the new version appear at once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from projections.sql.merge_parts import MergeClause, MergeParts
from replay.sinks import merge_rules as rules
from replay.sinks.delta_log import newest_checksum
from replay.sinks.ledger import UncastableValuesError
from replay.sinks.protocol import POS, TableSpec
from replay.spark import Column, DataFrame, F, T, named_column, quoted_name

REWRITE_MAX_BYTES = 4 << 20
"""Tables of at most this many bytes of data files are rewritten: rewriting 4 MiB of Parquet
costs about what a MERGE's fixed jobs cost here, in the worst case (a batch of keys all new)."""

ROW_LEVEL_PROPERTIES = (
    "delta.enableChangeDataFeed",
    "delta.enableRowTracking",
    "delta.enableDeletionVectors",
)
_IN_TABLE, _IN_BATCH = "__in_table", "__in_batch"
_ACTION, _KEEP, _DROP = "__merge_action", -1, -2


def rewrite_max_bytes() -> int:
    """The bound in force: ``$REPLICATOR_DELTA_REWRITE_BYTES`` (0 MERGEs into every table), else
    ``REWRITE_MAX_BYTES``."""
    return int(os.environ.get("REPLICATOR_DELTA_REWRITE_BYTES", str(REWRITE_MAX_BYTES)))


def rewrite_is_cheaper(table_dir: Path, max_bytes: int) -> bool:
    """Whether the table's newest checksum shows a table to rewrite rather than MERGE into: at
    most ``max_bytes`` (> 0) of data, unpartitioned, no row-level feature on (not known: no)."""
    checksum = newest_checksum(table_dir) if max_bytes > 0 else None
    if checksum is None:
        return False
    size, metadata = checksum.get("tableSizeBytes"), checksum.get("metadata")
    if not isinstance(size, int) or size > max_bytes or not isinstance(metadata, dict):
        return False
    if metadata.get("partitionColumns"):
        return False
    properties = metadata.get("configuration") or {}
    return not any(str(properties.get(p, "")).lower() == "true" for p in ROW_LEVEL_PROPERTIES)


def sink_merge(spec: TableSpec, names: Sequence[str]) -> MergeParts:
    """The sink's MERGE of a change batch ``s`` into table ``t`` (``merge_rules``), setting the
    columns ``names`` (data columns and ``__pos``) from the batch; its source is the batch's
    DataFrame, not a query (``source`` empty)."""
    values = tuple((n, f"s.{quoted_name(n)}") for n in names)
    on = " AND ".join(f"t.{quoted_name(k)} = s.{quoted_name(k)}" for k in spec.primary_key)
    clauses = (
        MergeClause(True, rules.DELETE_WHEN, "delete"),
        MergeClause(True, rules.UPDATE_WHEN, "update", values),
        MergeClause(False, rules.INSERT_WHEN, "insert", values),
    )
    return MergeParts(spec.name, "t", "", "s", on, clauses)


def merged_rows(
    spec: TableSpec, current: DataFrame, batch: DataFrame, columns: Sequence[tuple[str, T.DataType]]
) -> DataFrame:
    """``current`` (the table's rows, with ``__pos``) brought to ``columns`` with the applicable
    ``batch`` changes applied (one change per key): the table's new contents, with ``__pos``."""
    kept = set(current.columns)
    brought = []
    for name, kind in columns:
        if name in kept:
            value = named_column(name).cast(kind)  # check_casts first: all values cast
        elif name in spec.defaults:
            value = F.lit(spec.defaults[name]).cast(kind)
        else:
            value = F.lit(None).cast(kind)
        brought.append(value.alias(name))
    table = current.select(*brought, named_column(POS))
    return merge_result(sink_merge(spec, [*(n for n, _ in columns), POS]), table, batch)


def check_casts(
    spec: TableSpec, current: DataFrame, columns: Sequence[tuple[str, T.DataType]]
) -> None:
    """Raise ``UncastableValuesError`` when a kept column's stored values do not all cast to
    its new type (one aggregation, only over the retyped columns)."""
    old = {f.name: f.dataType for f in current.schema.fields}
    retyped = [(n, k) for n, k in columns if n in old and old[n] != k]
    if not retyped:
        return
    counts = current.select(
        *(F.count(F.when(uncastable(n, k), 1)).alias(n) for n, k in retyped)
    ).first()
    for name, kind in retyped:
        if counts is not None and counts[name]:
            raise UncastableValuesError(
                spec.name, name, old[name].simpleString(), kind.simpleString()
            )


def uncastable(name: str, kind: T.DataType) -> Column:
    """True where column ``name`` holds a value that does not cast to ``kind``."""
    value = named_column(name)
    return value.isNotNull() & value.try_cast(kind).isNull()


def sets_only(parts: MergeParts, columns: Sequence[str]) -> bool:
    """Whether every column the clauses of ``parts`` set is one of ``columns`` (if not, the
    MERGE itself is left to report it)."""
    known = {c.lower() for c in columns}
    return all(c.lower() in known for clause in parts.clauses for c, _ in clause.values)


def merge_result(parts: MergeParts, target: DataFrame, source: DataFrame) -> DataFrame:
    """The rows ``target`` holds after the MERGE ``parts`` of ``source`` into it, typed as the
    target (whose columns the clauses set: :func:`sets_only`): a matched row takes its first
    clause whose condition holds (DELETE drops it, UPDATE sets its columns, none keeps it), an
    unmatched source row its first INSERT whose condition holds. Like Delta's MERGE it expects
    one source row per target row at most (per-key aggregates, one change per key); unlike
    it, it does not check."""
    fields = [(f.name, f.dataType) for f in target.schema.fields]
    assigned = [{c.lower(): v for c, v in clause.values} for clause in parts.clauses]
    tagged = target.withColumn(_IN_TABLE, F.lit(True)).alias(parts.target_alias)
    sourced = source.withColumn(_IN_BATCH, F.lit(True)).alias(parts.source_alias)
    joined = tagged.join(sourced, F.expr(parts.on), "full_outer")
    in_table = F.col(f"{parts.target_alias}.{_IN_TABLE}").isNotNull()
    in_batch = F.col(f"{parts.source_alias}.{_IN_BATCH}").isNotNull()
    action = F.when(~in_batch, F.lit(_KEEP))
    for index, clause in enumerate(parts.clauses):
        applies = F.expr(clause.condition) if clause.condition else F.lit(True)
        present = (in_table & in_batch) if clause.matched else ~in_table
        action = action.when(present & applies, F.lit(index))
    action = action.when(in_table, F.lit(_KEEP)).otherwise(F.lit(_DROP))
    wanted = [i for i, c in enumerate(parts.clauses) if c.action != "delete"]
    picked = joined.select(action.alias(_ACTION), "*").where(F.col(_ACTION).isin(_KEEP, *wanted))
    columns = []
    for name, kind in fields:
        stored = F.col(f"{parts.target_alias}.{quoted_name(name)}")
        value = F.when(F.col(_ACTION) == _KEEP, stored)
        for index in wanted:
            given = assigned[index].get(name.lower())
            if given is not None:
                chosen = F.expr(given)
            elif parts.clauses[index].action == "update":
                chosen = stored
            else:
                chosen = F.lit(None)
            value = value.when(F.col(_ACTION) == index, chosen.cast(kind))
        columns.append(value.alias(name))
    return picked.select(*columns)
