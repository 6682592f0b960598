"""Merge semantics shared by the sinks: column checks and the newer-wins predicates.

A batch applies to a table ``t`` (data columns plus ``__pos``) and its tombstone table ``x`` (key
columns plus ``__pos`` of the newest delete seen per key; the Delta sink stores every delete
appended and reads them folded to that) like this:

1. ``__truncated``: the table and its tombstones are cleared first;
2. deletes raise their key's tombstone to the delete's ``__pos`` (tombstones are facts derived
   from the stream, so recording them again is harmless);
3. a change ``s`` applies to its row only if it is newer than the stored row (``s.__pos >
   t.__pos``), and an upsert only if it is also newer than the key's tombstone, so that a late
   older upsert never resurrects a deleted key. Positions compare as strings (byte order in both
   Spark and DuckDB).

The predicates below are SQL that both Spark and DuckDB accept, with ``s`` the batch, ``t`` the
table and ``x`` the tombstone joined to the batch (the meta columns need no quoting).
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc.errors import ChangeEventError
from replay.sinks.protocol import META_COLUMNS, OP, OP_DELETE, OP_UPSERT, POS, TRUNCATED, TableSpec

TOMBSTONES_SUFFIX = "__tombstones"
TOMBSTONE_POS = "__tombstone_pos"

NEWER_THAN_ROW = f"(t.{POS} IS NULL OR s.{POS} > t.{POS})"
DELETE_WHEN = f"s.{OP} = '{OP_DELETE}' AND {NEWER_THAN_ROW}"
UPDATE_WHEN = f"s.{OP} = '{OP_UPSERT}' AND {NEWER_THAN_ROW}"
INSERT_WHEN = f"s.{OP} = '{OP_UPSERT}'"
# On the batch joined to its keys' tombstones (``__tombstone_pos``): the changes that may apply.
NOT_TOMBSTONED = (
    f"{OP} = '{OP_DELETE}' OR ({OP} = '{OP_UPSERT}' AND "
    f"({TOMBSTONE_POS} IS NULL OR {POS} > {TOMBSTONE_POS}))"
)


def tombstones_table(table: str) -> str:
    """The name of ``table``'s companion table of remembered deletes."""
    return f"{table}{TOMBSTONES_SUFFIX}"


def change_columns(spec: TableSpec, columns: Sequence[str]) -> list[str]:
    """The data columns of a :meth:`Sink.merge` DataFrame, checking the meta and key columns."""
    for meta in META_COLUMNS:
        if meta not in columns:
            raise ChangeEventError(f"changes for table {spec.name} lack a meta column", field=meta)
    return _data_columns(spec, [c for c in columns if c not in META_COLUMNS])


def row_columns(spec: TableSpec, columns: Sequence[str]) -> list[str]:
    """The data columns of a :meth:`Sink.replace` DataFrame (which may carry ``__pos``)."""
    for meta in (OP, TRUNCATED):
        if meta in columns:
            raise ChangeEventError(f"rows replacing {spec.name} carry a change column", field=meta)
    return _data_columns(spec, [c for c in columns if c != POS])


def _data_columns(spec: TableSpec, data: list[str]) -> list[str]:
    if not spec.primary_key:
        raise ChangeEventError(f"table {spec.name} has no primary key", field="primary_key")
    if spec.name.endswith(TOMBSTONES_SUFFIX) or not spec.name or "/" in spec.name:
        raise ChangeEventError(f"invalid table name {spec.name!r}", field="name")
    for key in spec.primary_key:
        if key not in data:
            raise ChangeEventError(f"table {spec.name} lacks a primary-key column", field=key)
    return data
