"""The in-memory state store (``memory://``): tests and throw-away state; gone when closed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from cdc.state.errors import StateStoreError
from cdc.state.protocol import TableWrites
from cdc.streams.protocol import TopicPartition


class MemoryStateStore:
    """A ``StateStore`` in a dict per table; ``scan`` sorts (O(n log n)) and sees its call time.

    ``apply`` merges the checkpoint: partitions it does not name keep their position.
    """

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._tables: dict[str, dict[bytes, bytes]] | None = {}
        self._checkpoint: dict[TopicPartition, int] = {}

    def get(self, table: str, key: bytes) -> bytes | None:
        """The value at ``key`` in ``table``, or None."""
        return self._open().get(table, {}).get(key)

    def scan(self, table: str) -> Iterator[tuple[bytes, bytes]]:
        """All rows of ``table`` in key order, as of this call."""
        return iter(sorted(self._open().get(table, {}).items()))

    def apply(
        self,
        writes: TableWrites,
        checkpoint: Mapping[TopicPartition, int],
        truncated: frozenset[str] = frozenset(),
    ) -> None:
        """Clear ``truncated``, apply ``writes``, and record ``checkpoint``, all or nothing."""
        tables = self._open()
        _check(writes, checkpoint)  # nothing below can fail half-way
        for table in truncated:
            tables.pop(table, None)
        for table, rows in writes.items():
            stored = tables.setdefault(table, {})
            for key, value in rows.items():
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = value
        self._checkpoint.update(
            {TopicPartition(tp.topic, tp.partition): offset for tp, offset in checkpoint.items()}
        )

    def checkpoint(self) -> dict[TopicPartition, int]:
        """Next changelog offset to apply, per partition."""
        self._open()
        return dict(self._checkpoint)

    def wipe(self) -> None:
        """Drop all tables and the checkpoint."""
        self._open()
        self._tables = {}
        self._checkpoint = {}

    def close(self) -> None:
        """Drop everything; later calls raise ``StateStoreError``."""
        self._tables = None

    def _open(self) -> dict[str, dict[bytes, bytes]]:
        if self._tables is None:
            raise StateStoreError(f"state store {self.url} is closed")
        return self._tables


def _check(writes: TableWrites, checkpoint: Mapping[TopicPartition, int]) -> None:
    for rows in writes.values():
        for key, value in rows.items():
            if not isinstance(key, bytes) or not isinstance(value, bytes | None):
                raise TypeError("state store keys and values are bytes")
    for offset in checkpoint.values():
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"a checkpoint offset is a non-negative int, not {offset!r}")
