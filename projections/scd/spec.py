"""SCD type 1/2 projections of a source table, as Delta Live Tables' APPLY CHANGES INTO declares
them: keys, ``sequence_by``, column selection, history tracking, null-update handling.

Changes reach them as :class:`ScdChange` records (an upsert or delete of one key at a sequence
value, or a truncate); :func:`scd_changes` derives them from change events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from cdc.errors import ChangeEventError
from projections.change_ops import (
    CREATE,
    DELETE,
    READ,
    TRUNCATE,
    UPDATE,
    ChangeLike,
    Row,
    change_op,
    image,
)
from projections.errors import ProjectionError

START_AT: Final = "__start_at"
END_AT: Final = "__end_at"

Key = tuple[Any, ...]


@dataclass(frozen=True)
class ScdSpec:
    """An APPLY CHANGES target: ``stored_as`` 1 keeps the latest row per key, 2 its history.

    ``sequence_by`` names the column ordering a key's changes (None: the event's source
    position). ``column_list``/``except_column_list`` choose the columns (keys always kept);
    type 2 opens a new version only when a tracked column changes
    (``track_history_column_list``/``track_history_except_column_list``, default all), and
    updates the current version in place otherwise. ``ignore_null_updates`` keeps a column's
    value when an upsert of an existing row brings NULL for it.
    """

    name: str
    keys: Sequence[str]
    sequence_by: str | None = None
    stored_as: Literal[1, 2] = 1
    column_list: Sequence[str] | None = None
    except_column_list: Sequence[str] | None = None
    track_history_column_list: Sequence[str] | None = None
    track_history_except_column_list: Sequence[str] | None = None
    ignore_null_updates: bool = False

    def __post_init__(self) -> None:
        for name in ("keys", "column_list", "except_column_list", "track_history_column_list",
                     "track_history_except_column_list"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, str):
                raise ProjectionError(f"{self.name}: {name} is a list of column names")
            if value is not None:
                object.__setattr__(self, name, tuple(value))
        self._validate()

    def _validate(self) -> None:
        where = f"SCD projection {self.name}"
        if not self.keys:
            raise ProjectionError(f"{where} needs keys")
        if self.stored_as not in (1, 2):
            raise ProjectionError(f"{where}: stored_as is 1 or 2, not {self.stored_as!r}")
        if self.column_list is not None and self.except_column_list is not None:
            raise ProjectionError(f"{where}: give column_list or except_column_list, not both")
        tracking = (self.track_history_column_list, self.track_history_except_column_list)
        if all(t is not None for t in tracking):
            raise ProjectionError(
                f"{where}: give track_history_column_list or track_history_except_column_list, "
                "not both"
            )
        if self.stored_as == 1 and any(t is not None for t in tracking):
            raise ProjectionError(f"{where}: history tracking needs stored_as=2")
        if any(k in (self.except_column_list or ()) for k in self.keys):
            raise ProjectionError(f"{where}: except_column_list cannot drop a key column")
        if self.column_list is not None:
            kept = set(self.keys) | set(self.column_list)
            unknown = [c for c in self.track_history_column_list or () if c not in kept]
            if unknown:
                raise ProjectionError(f"{where}: tracked column {unknown[0]} is not in column_list")
        reserved = [c for c in (*self.keys, *(self.column_list or ())) if c.startswith("__")]
        if reserved:
            raise ProjectionError(f"{where}: column {reserved[0]}: names with __ are reserved")

    def project(self, row: Row) -> Row:
        """The columns of ``row`` the target keeps (keys first when a column list is given)."""
        if self.column_list is not None:
            wanted = dict.fromkeys((*self.keys, *self.column_list))
            return {c: row.get(c) for c in wanted}
        dropped = set(self.except_column_list or ())
        return {c: v for c, v in row.items() if c not in dropped}

    def tracked(self, column: str) -> bool:
        """True when a change of ``column`` opens a new type 2 version."""
        if self.track_history_column_list is not None:
            return column in self.track_history_column_list
        return column not in (self.track_history_except_column_list or ())

    def key_of(self, row: Row, side: str = "after") -> Key:
        """The key of a source row image; a missing key column raises, naming the field."""
        for column in self.keys:
            if column not in row:
                raise ChangeEventError("the row image lacks a key column", field=f"{side}.{column}")
        return tuple(row[c] for c in self.keys)


@dataclass(frozen=True, slots=True)
class ScdChange:
    """An upsert or delete of ``key`` at ``sequence``, or a truncate (a delete of every key).

    A truncate without a sequence is placed at the greatest sequence seen before it: it deletes
    everything that arrived before it, and nothing older arriving later comes back.
    """

    kind: Literal["upsert", "delete", "truncate"]
    key: Key = ()
    row: Row | None = None
    sequence: Any = None


def scd_changes(
    spec: ScdSpec,
    changes: Iterable[ChangeLike],
    *,
    sequence_of: Callable[[ChangeLike], Any] | None = None,
) -> list[ScdChange]:
    """The SCD changes of change events: c/r/u upsert the after image, d deletes, t truncates;
    an update that changes the key deletes the old key and upserts the new one."""
    out: list[ScdChange] = []
    for change in changes:
        op = change_op(change)
        if op == TRUNCATE:
            position = None if spec.sequence_by or sequence_of else _position(change)
            out.append(ScdChange("truncate", sequence=position))
        elif op in (CREATE, READ, UPDATE):
            after = image(change, "after")
            sequence = _sequence(spec, change, after, "after", sequence_of)
            key = spec.key_of(after)
            if op == UPDATE and change.before is not None:
                old = spec.key_of(image(change, "before"), "before")
                if old != key:
                    out.append(ScdChange("delete", old, None, sequence))
            out.append(ScdChange("upsert", key, after, sequence))
        elif op == DELETE:
            before = image(change, "before")
            sequence = _sequence(spec, change, before, "before", sequence_of)
            out.append(ScdChange("delete", spec.key_of(before, "before"), None, sequence))
    return out


def _sequence(
    spec: ScdSpec,
    change: ChangeLike,
    row: Row,
    side: str,
    sequence_of: Callable[[ChangeLike], Any] | None,
) -> Any:
    if sequence_of is not None:
        return sequence_of(change)
    if spec.sequence_by is None:
        return _position(change)
    value = row.get(spec.sequence_by)
    if value is None:
        raise ChangeEventError("the sequence_by column is missing or NULL",
                               field=f"{side}.{spec.sequence_by}")  # fmt: skip
    return value


def _position(change: ChangeLike) -> Any:
    position = getattr(change, "position", None)
    if position is None:
        raise ChangeEventError("the change has no source position to sequence by", field="source")
    return position()
