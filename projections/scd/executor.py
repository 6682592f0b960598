"""SCD type 1/2 maintenance over batches of changes (in memory), and the reference that walks all
changes at once; both fold keys with :mod:`projections.scd.keylogic`.

The executor keeps, per key, its changes in stamp order and the walk's state. A change newer
than everything its key has seen is one step; a late one is inserted in place and the key is
walked again. Type 1 drops a key's changes before its last self-contained one (a delete, or a
full image), so a deleted key keeps only its delete: the tombstone that stops a late older
upsert from bringing it back. Type 2 keeps every change of a key, since a late change can move
version boundaries anywhere in its history. Each batch returns the rows to upsert and the row
identities to delete (type 1: the key; type 2: the key and ``__start_at``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc.errors import ChangeEventError
from projections.change_ops import Row
from projections.scd.keylogic import KeyEvent, KeyLogic, Scd2Logic, Stamp, logic_for, walk
from projections.scd.spec import Key, ScdChange, ScdSpec


@dataclass
class ScdDelta:
    """What one batch changed in the target table."""

    upserts: list[Row] = field(default_factory=list)
    deletes: list[Key] = field(default_factory=list)


@dataclass
class _KeyState:
    events: list[KeyEvent]
    state: Any


def _stamp(event: KeyEvent) -> Stamp:
    return event.stamp


class _Sequencer:
    """Stamps changes in arrival order and places sequence-less truncates at the high water."""

    def __init__(self) -> None:
        self.arrivals = 0
        self.high_water: Any = None

    def stamp(self, change: ScdChange) -> Stamp | None:
        arrival = self.arrivals
        self.arrivals += 1
        sequence = change.sequence
        if sequence is None and change.kind == "truncate":
            sequence = self.high_water
        elif sequence is None:
            raise ChangeEventError(f"an SCD {change.kind} needs a sequence", field="sequence")
        if sequence is None:
            return None  # a truncate before anything arrived deletes nothing
        if self.high_water is None or sequence > self.high_water:
            self.high_water = sequence
        return (sequence, arrival)


def _event(spec: ScdSpec, change: ScdChange, stamp: Stamp) -> KeyEvent:
    if change.kind == "delete":
        return KeyEvent(stamp, None)
    if change.row is None:
        raise ChangeEventError("an SCD upsert needs a row", field="after")
    return KeyEvent(stamp, spec.project(change.row))


class ScdExecutor:
    """Maintains an SCD projection batch by batch; :meth:`rows` is the target table."""

    def __init__(self, spec: ScdSpec) -> None:
        self.spec = spec
        self.logic: KeyLogic[Any] = logic_for(spec)
        self._keys: dict[Key, _KeyState] = {}
        self._truncates: list[KeyEvent] = []
        self._sequencer = _Sequencer()

    def apply(self, changes: Iterable[ScdChange]) -> ScdDelta:
        """Apply one batch of changes; returns the target rows it upserted and deleted."""
        before: dict[Key, list[Row]] = {}
        for change in changes:
            stamp = self._sequencer.stamp(change)
            if stamp is None:
                continue
            if change.kind == "truncate":
                truncate = KeyEvent(stamp, None)
                bisect.insort(self._truncates, truncate, key=_stamp)
                for key in list(self._keys):
                    self._place(key, truncate, before)
            else:
                self._place(change.key, _event(self.spec, change, stamp), before)
        return self._delta(before)

    def rows(self) -> list[Row]:
        """Every row of the target table (type 2: every version)."""
        return [row for key, ks in self._keys.items() for row in self.logic.rows(key, ks.state)]

    @property
    def remembered_keys(self) -> int:
        """Keys with state in memory (current rows, histories and tombstones)."""
        return len(self._keys)

    def _seed(self) -> list[KeyEvent]:
        """The changes a key has before its first own change: the truncates."""
        seed = list(self._truncates)
        return seed if isinstance(self.logic, Scd2Logic) else seed[-1:]

    def _place(self, key: Key, event: KeyEvent, before: dict[Key, list[Row]]) -> None:
        ks = self._keys.get(key)
        if ks is None:
            seed = self._seed()
            ks = self._keys[key] = _KeyState(seed, walk(self.logic, seed))
        if key not in before:
            before[key] = self.logic.rows(key, ks.state)
        if not ks.events or event.stamp > ks.events[-1].stamp:
            ks.events.append(event)
            ks.state = self.logic.step(ks.state, event)
        else:
            bisect.insort(ks.events, event, key=_stamp)
            ks.state = walk(self.logic, ks.events)
        if not isinstance(self.logic, Scd2Logic):
            self._prune(key, ks)

    def _prune(self, key: Key, ks: _KeyState) -> None:
        for i in range(len(ks.events) - 1, 0, -1):
            if self.logic.self_contained(ks.events[i]):
                del ks.events[:i]
                break
        if ks.state is None and ks.events == self._seed():
            del self._keys[key]  # no different from a key never seen

    def _delta(self, before: dict[Key, list[Row]]) -> ScdDelta:
        delta = ScdDelta()
        for key, old_rows in before.items():
            ks = self._keys.get(key)
            new_rows = self.logic.rows(key, ks.state) if ks else []
            old = {self.logic.identity(r): r for r in old_rows}
            new = {self.logic.identity(r): r for r in new_rows}
            delta.deletes += [identity for identity in old if identity not in new]
            delta.upserts += [row for identity, row in new.items() if old.get(identity) != row]
        return delta


def scd_reference(spec: ScdSpec, changes: Iterable[ScdChange]) -> list[Row]:
    """The target table after ``changes`` (in arrival order): every key's changes, truncates
    included, sorted by stamp and walked from nothing."""
    logic: KeyLogic[Any] = logic_for(spec)
    sequencer = _Sequencer()
    per_key: dict[Key, list[KeyEvent]] = {}
    truncates: list[KeyEvent] = []
    for change in changes:
        stamp = sequencer.stamp(change)
        if stamp is None:
            continue
        if change.kind == "truncate":
            truncates.append(KeyEvent(stamp, None))
        else:
            per_key.setdefault(change.key, []).append(_event(spec, change, stamp))
    rows: list[Row] = []
    for key, events in per_key.items():
        rows += logic.rows(key, walk(logic, sorted(events + truncates, key=_stamp)))
    return rows
