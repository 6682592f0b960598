"""The per-key logic of SCD projections, in one place: what one change does to one key.

A key's changes are ordered by their stamp, ``(sequence, arrival)``: the sequence value, then the
order of arrival for changes with equal sequence values. The result of a key is defined as the
walk over its changes in stamp order (truncates count as deletes of every key), so a late change
is placed where its sequence says: the reference walks everything sorted, the executor walks
again only the keys a late change reaches.

Type 1 keeps the walk's current row. Type 2 keeps versions: an upsert opens a new version when
a tracked column changes (closing the open one at the upsert's sequence), updates the open version
in place otherwise; a delete closes it. A version that opens and closes at the same sequence was
never valid and is left out of the table. ``UNAVAILABLE`` values keep the previous value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from cdc.events.unavailable import UNAVAILABLE
from projections.change_ops import Row
from projections.scd.spec import END_AT, START_AT, Key, ScdSpec

Stamp = tuple[Any, int]
"""``(sequence, arrival)``: where a change sits in its key's history."""

State = TypeVar("State")


class KeyEvent(NamedTuple):
    """One change of one key: an upsert (``row``, projected) or a delete (``row`` None)."""

    stamp: Stamp
    row: Row | None


def merge_image(current: Row | None, image: Row, ignore_null_updates: bool) -> Row:
    """The row an upsert of ``image`` leaves on ``current`` (the key's row, None if none)."""
    if current is None:
        return {c: (None if v is UNAVAILABLE else v) for c, v in image.items()}
    if ignore_null_updates:
        merged = dict(current)
        merged.update((c, v) for c, v in image.items() if v is not None and v is not UNAVAILABLE)
        return merged
    return {c: (current.get(c) if v is UNAVAILABLE else v) for c, v in image.items()}


@dataclass
class Version:
    """One type 2 version of a key: its row, valid from ``start`` until ``end`` (None: open)."""

    row: Row
    start: Stamp
    end: Stamp | None = None


class KeyLogic(Protocol[State]):
    """The fold of one key's changes, in stamp order, and what the table shows of it."""

    def initial(self) -> State: ...

    def step(self, state: State, event: KeyEvent) -> State: ...

    def self_contained(self, event: KeyEvent) -> bool: ...

    def rows(self, key: Key, state: State) -> list[Row]: ...

    def identity(self, row: Row) -> Key: ...


@dataclass(frozen=True)
class Scd1Logic:
    """Type 1: the current row of the key."""

    spec: ScdSpec

    def initial(self) -> Row | None:
        return None

    def step(self, state: Row | None, event: KeyEvent) -> Row | None:
        if event.row is None:
            return None
        return merge_image(state, event.row, self.spec.ignore_null_updates)

    def self_contained(self, event: KeyEvent) -> bool:
        """True when the step ignores the state before it (history before it can be dropped)."""
        if event.row is None:
            return True
        if self.spec.ignore_null_updates:
            return False
        return all(v is not UNAVAILABLE for v in event.row.values())

    def rows(self, key: Key, state: Row | None) -> list[Row]:
        return [] if state is None else [state]

    def identity(self, row: Row) -> Key:
        return tuple(row[k] for k in self.spec.keys)


@dataclass(frozen=True)
class Scd2Logic:
    """Type 2: the versions of the key."""

    spec: ScdSpec

    def initial(self) -> list[Version]:
        return []

    def step(self, state: list[Version], event: KeyEvent) -> list[Version]:
        current = state[-1] if state and state[-1].end is None else None
        if event.row is None:
            if current is not None:
                current.end = event.stamp
            return state
        row = merge_image(current.row if current else None, event.row,
                          self.spec.ignore_null_updates)  # fmt: skip
        if current is None:
            state.append(Version(row, event.stamp))
        elif self._history_changes(current.row, row):
            current.end = event.stamp
            state.append(Version(row, event.stamp))
        else:
            current.row = row
        return state

    def _history_changes(self, old: Row, new: Row) -> bool:
        return any(
            self.spec.tracked(c) and old.get(c) != new.get(c) for c in old.keys() | new.keys()
        )

    def self_contained(self, event: KeyEvent) -> bool:
        return False

    def rows(self, key: Key, state: list[Version]) -> list[Row]:
        out = []
        for version in state:
            end = None if version.end is None else version.end[0]
            if version.end is None or end != version.start[0]:
                out.append({**version.row, START_AT: version.start[0], END_AT: end})
        return out

    def identity(self, row: Row) -> Key:
        return (*(row[k] for k in self.spec.keys), row[START_AT])


def logic_for(spec: ScdSpec) -> Scd1Logic | Scd2Logic:
    """The per-key logic of ``spec``'s SCD type."""
    return Scd1Logic(spec) if spec.stored_as == 1 else Scd2Logic(spec)


def walk(logic: KeyLogic[State], events: Iterable[KeyEvent]) -> State:
    """Fold ``events`` (in stamp order) from the empty state."""
    state = logic.initial()
    for event in events:
        state = logic.step(state, event)
    return state
