"""What a committed state transaction changed: one captured change per key, table or row read.

The connector turns these into change events (Debezium ops c/u/d/r/t) for the changelog, and
the restore path (``apply_changelog_batch``) applies them back onto a store.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

Row = dict[str, Any]
"""A decoded row: column name to python value."""


class ChangeKind(StrEnum):
    """What happened to a key (or, for ``TRUNCATE``, to a whole table)."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    READ = "read"
    TRUNCATE = "truncate"


class CapturedChange(NamedTuple):
    """One change of a state table (a named tuple: one is made per write, and a frozen
    dataclass costs three times as much to build).

    ``key`` is the primary-key columns of the row (empty for a truncate). ``before`` is the row
    before the change (None for a create, a read or a truncate) and ``after`` the row after it
    (None for a delete or a truncate).
    """

    table: str
    key: Row
    before: Row | None
    after: Row | None
    kind: ChangeKind

    @staticmethod
    def between(table: str, key: Row, before: Row | None, after: Row | None) -> CapturedChange:
        """The create, update or delete that turns ``before`` into ``after``."""
        if before is None and after is None:
            raise ValueError("a change needs a before or an after image")
        if before is None:
            kind = ChangeKind.CREATE
        elif after is None:
            kind = ChangeKind.DELETE
        else:
            kind = ChangeKind.UPDATE
        return CapturedChange(table, key, before, after, kind)
