"""Change batches of a test table, and a pure-Python model of the merge semantics."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cdc.streams.protocol import TopicPartition
from replay.sinks.protocol import OP_DELETE, OP_TRUNCATE, OP_UPSERT, Sink, TableSpec

ROW_SCHEMA = "id BIGINT, name STRING, amount DECIMAL(12,2)"
CHANGE_SCHEMA = f"{ROW_SCHEMA}, __op STRING, __pos STRING, __truncated BOOLEAN"
SPEC = TableSpec("accounts", ("id",))
P0, P1 = TopicPartition("db.accounts", 0), TopicPartition("db.accounts", 1)

Change = tuple[Any, ...]
SinkFactory = Callable[[str], Sink]


def amount(key: int) -> Decimal:
    """The ``amount`` of ``key``'s rows: exercises DECIMAL on the way in and out."""
    return Decimal(key) + Decimal("0.25")


def upsert(key: int, name: str, pos: int, *, truncated: bool = False) -> Change:
    """An upsert of ``key`` at position ``pos`` (zero-padded, so it sorts as a string)."""
    return (key, name, amount(key), OP_UPSERT, f"{pos:08d}", truncated)


def delete(key: int, pos: int, *, truncated: bool = False) -> Change:
    """A delete of ``key`` at position ``pos``."""
    return (key, None, None, OP_DELETE, f"{pos:08d}", truncated)


def truncate() -> Change:
    """The lone row of a truncate with no change after it."""
    return (None, None, None, OP_TRUNCATE, None, True)


def row(key: int, name: str) -> tuple[Any, ...]:
    """The final image of ``key`` as ``read()`` returns it."""
    return (key, name, amount(key))


@dataclass
class MergeModel:
    """The reference semantics: newer-wins by position, remembered deletes, truncates."""

    rows: dict[int, tuple[str, str]] = field(default_factory=dict)  # key -> (name, pos)
    tombstones: dict[int, str] = field(default_factory=dict)

    def apply(self, batch: list[Change]) -> None:
        """Apply one batch of changes."""
        if any(c[5] for c in batch):
            self.rows.clear()
            self.tombstones.clear()
        for key, _, _, op, pos, _ in batch:
            if op == OP_DELETE:
                self.tombstones[key] = max(pos, self.tombstones.get(key, pos))
        for key, name, _, op, pos, _ in batch:
            stored = self.rows.get(key)
            if op == OP_TRUNCATE or (stored is not None and pos <= stored[1]):
                continue
            if op == OP_DELETE:
                self.rows.pop(key, None)
            elif key not in self.tombstones or pos > self.tombstones[key]:
                self.rows[key] = (name, pos)

    def snapshot(self) -> list[tuple[Any, ...]]:
        """The rows as ``read()`` returns them, sorted."""
        return sorted(row(k, name) for k, (name, _) in self.rows.items())


def random_batches(seed: int, count: int, keys: int = 12) -> list[list[Change]]:
    """``count`` batches over ``keys`` keys with late (older) changes and one truncate."""
    rng = random.Random(seed)
    batches: list[list[Change]] = []
    for b in range(count):
        chosen = rng.sample(range(keys), rng.randint(1, keys * 2 // 3))
        truncated = b == count // 2
        batch = []
        for key in chosen:
            pos = 100 * b + rng.randint(-150, 100)  # some older than earlier batches' changes
            if rng.random() < 0.35:
                batch.append(delete(key, max(pos, 0), truncated=truncated))
            else:
                batch.append(upsert(key, f"n{b}-{key}", max(pos, 0), truncated=truncated))
        batches.append(batch)
    return batches


def snapshot(
    sink: Sink, version: int | None = None, table: str = SPEC.name
) -> list[tuple[Any, ...]]:
    """The table's rows (or those of an older version) as sorted tuples."""
    return sorted(tuple(r) for r in sink.read(table, version).collect())
