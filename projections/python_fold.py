"""Python projections: a fold function over change events into keyed rows, for read models that
SQL cannot express.

``fold(change, current, ctx)`` gets one change, the projection's current row for the change's key
(None when there is none) and a :class:`FoldContext`, and returns the new row, or None to delete
it. The key is read from the change's row image (``after``, or ``before`` for a delete); an update
that moves a row to another key reaches the fold as a delete of the old key and a create of the
new one. ``ctx.rebuilding`` is True while history is replayed (a rebuild, a new version): the
fold must then skip side effects such as sending e-mails. A truncate clears the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.errors import ChangeEventError
from projections.change_ops import (
    CREATE,
    DELETE,
    ROW_OPS,
    TRUNCATE,
    UPDATE,
    ChangeLike,
    Row,
    RowChange,
    change_op,
    image,
)
from projections.errors import ProjectionError

Key = tuple[Any, ...]


@dataclass(frozen=True)
class FoldContext:
    """What a fold knows besides the change: the projection, the key, and whether history is
    being replayed (``rebuilding``: skip side effects)."""

    projection: str
    key: Key
    rebuilding: bool


Fold = Callable[[ChangeLike, Row | None, FoldContext], Row | None]


@dataclass(frozen=True)
class PythonProjection:
    """A projection keyed by ``key`` columns (read from the source rows), maintained by ``fold``."""

    name: str
    key: Sequence[str]
    fold: Fold
    clear_on_truncate: bool = True
    """False keeps the rows when the source table is truncated (e.g. an audit trail)."""

    def __post_init__(self) -> None:
        if not self.key:
            raise ProjectionError(f"python projection {self.name} needs key columns")

    def key_of(self, row: Row, side: str) -> Key:
        """The projection key of a source row image."""
        missing = [k for k in self.key if k not in row]
        if missing:
            raise ChangeEventError("the row image lacks a key column", field=f"{side}.{missing[0]}")
        return tuple(row[k] for k in self.key)


@dataclass
class FoldResult:
    """What one batch changed: the new row of each upserted key, and the deleted keys."""

    upserts: dict[Key, Row] = field(default_factory=dict)
    deletes: set[Key] = field(default_factory=set)
    truncated: bool = False


class PythonProjectionExecutor:
    """Folds batches of changes into ``rows`` (key tuple -> row), in memory."""

    def __init__(self, projection: PythonProjection, rows: dict[Key, Row] | None = None) -> None:
        self.projection = projection
        self.rows: dict[Key, Row] = rows if rows is not None else {}

    def apply(self, changes: Iterable[ChangeLike], *, rebuilding: bool = False) -> FoldResult:
        """Fold ``changes`` in order; the result says which keys ended up upserted or deleted."""
        result = FoldResult()
        for change in changes:
            op = change_op(change)
            if op == TRUNCATE and self.projection.clear_on_truncate:
                self.rows.clear()
                result = FoldResult(truncated=True)
            elif op in ROW_OPS:
                for part in self._split(change, op):
                    self._fold_one(part, result, rebuilding)
        return result

    def _split(self, change: ChangeLike, op: str) -> list[ChangeLike]:
        if op != UPDATE or change.before is None:
            return [change]
        before, after = image(change, "before"), image(change, "after")
        if self.projection.key_of(before, "before") == self.projection.key_of(after, "after"):
            return [change]
        return [RowChange(DELETE, before, None, change), RowChange(CREATE, None, after, change)]

    def _fold_one(self, change: ChangeLike, result: FoldResult, rebuilding: bool) -> None:
        side = "before" if change_op(change) == DELETE else "after"
        key = self.projection.key_of(image(change, side), side)
        current = self.rows.get(key)
        ctx = FoldContext(self.projection.name, key, rebuilding)
        row = self.projection.fold(change, dict(current) if current is not None else None, ctx)
        if row is None:
            self.rows.pop(key, None)
            result.upserts.pop(key, None)
            result.deletes.add(key)
            return
        row = dict(row)
        for name, value in zip(self.projection.key, key, strict=True):
            if row.setdefault(name, value) != value:
                raise ProjectionError(
                    f"python projection {self.projection.name}: the fold changed key column "
                    f"{name} from {value!r} to {row[name]!r}"
                )
        self.rows[key] = row
        result.deletes.discard(key)
        result.upserts[key] = row


def fold_changes(
    projection: PythonProjection, changes: Iterable[ChangeLike], *, rebuilding: bool = True
) -> dict[Key, Row]:
    """Every row of ``projection`` after folding ``changes`` from nothing (a rebuild)."""
    executor = PythonProjectionExecutor(projection)
    executor.apply(changes, rebuilding=rebuilding)
    return executor.rows
