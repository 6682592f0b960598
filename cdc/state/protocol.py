"""The local state-store extension point: durable bytes-to-bytes tables with a checkpoint.

A store holds the state tables of one processor. ``apply`` is atomic: the writes of a committed
processor transaction and the changelog checkpoint they bring the store to land together, so
after a crash the store is exactly at its checkpoint and restore replays the changelog from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from cdc.streams.protocol import TopicPartition

TableWrites = Mapping[str, Mapping[bytes, bytes | None]]
"""Per table name, per encoded key: the encoded row, or None for a delete."""


class StateStore(Protocol):
    url: str

    def get(self, table: str, key: bytes) -> bytes | None: ...

    def scan(self, table: str) -> Iterator[tuple[bytes, bytes]]:
        """All rows of ``table`` in key order."""
        ...

    def apply(
        self,
        writes: TableWrites,
        checkpoint: Mapping[TopicPartition, int],
        truncated: frozenset[str] = frozenset(),
    ) -> None:
        """Atomically clear ``truncated`` tables, apply ``writes``, and record ``checkpoint``."""
        ...

    def checkpoint(self) -> dict[TopicPartition, int]:
        """Changelog positions the store reflects (next offset to apply per partition)."""
        ...

    def wipe(self) -> None:
        """Drop all tables and the checkpoint (before a rebuild from the changelog)."""
        ...

    def close(self) -> None: ...
