"""What projections read from a change: its op (c/u/d/r/t) and row images, whatever its class.

Projections take ``cdc.events.ChangeEvent`` (``op``, ``before``, ``after``), ``cdc.state``'s
``CapturedChange`` (``kind``, ``before``, ``after``) or any object shaped like either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from cdc.errors import ChangeEventError
from cdc.events.unavailable import UNAVAILABLE
from cdc.state.changes import ChangeKind

Row = dict[str, Any]

CREATE, UPDATE, DELETE, READ, TRUNCATE, MESSAGE = "c", "u", "d", "r", "t", "m"
ROW_OPS: Final = frozenset({CREATE, UPDATE, DELETE, READ})

_KIND_OPS: Final = {
    ChangeKind.CREATE: CREATE,
    ChangeKind.UPDATE: UPDATE,
    ChangeKind.DELETE: DELETE,
    ChangeKind.READ: READ,
    ChangeKind.TRUNCATE: TRUNCATE,
}


class ChangeLike(Protocol):
    """A change with row images (``op`` or ``kind`` is read by :func:`change_op`)."""

    @property
    def before(self) -> Mapping[str, Any] | None: ...

    @property
    def after(self) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class RowChange:
    """A plain change: ``op`` and images (used for the halves of a key-changing update)."""

    op: str
    before: Row | None
    after: Row | None
    origin: object = None
    """The change this one was derived from, if any."""


def change_op(change: object) -> str:
    """The Debezium op letter of ``change`` (``c``, ``u``, ``d``, ``r``, ``t`` or ``m``)."""
    op = getattr(change, "op", None)
    if op is None:
        kind = getattr(change, "kind", None)
        if isinstance(kind, ChangeKind):
            return _KIND_OPS[kind]
        raise ChangeEventError(f"a {type(change).__name__} has no op", field="op")
    return str(op)


def image(change: ChangeLike, side: str) -> Row:
    """The ``before`` or ``after`` image of ``change`` as a dict; a missing image raises."""
    row = change.before if side == "before" else change.after
    if row is None:
        raise ChangeEventError(f"op {change_op(change)!r} needs a {side} image", field=side)
    return dict(row)


def pick(row: Mapping[str, Any], columns: tuple[str, ...], side: str) -> Row:
    """``columns`` of ``row``; a missing or UNAVAILABLE column raises, naming the field."""
    picked = {}
    for name in columns:
        if name not in row:
            raise ChangeEventError("the row image lacks a column", field=f"{side}.{name}")
        value = row[name]
        if value is UNAVAILABLE:
            raise ChangeEventError(
                "the column's value is unavailable (fill it from the previous row first)",
                field=f"{side}.{name}",
            )
        picked[name] = value
    return picked
