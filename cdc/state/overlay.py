"""Write layers over a store: buffered table writes that reads see before the store does.

A transaction buffers its writes in a ``WriteLayer``; on commit the layer merges into the
processor's pending layer (committed, not yet applied to the store); the pending layer goes to
``StateStore.apply`` after the changelog commit. ``LayeredReader`` reads through the layers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import MappingProxyType

from cdc.state.protocol import StateStore, TableWrites

_NONE_CLEARED: frozenset[str] = frozenset()  # shared: most layers clear nothing


class WriteLayer:
    """Encoded writes per table (None deletes) and the tables cleared before them, in order."""

    __slots__ = ("truncated", "writes")

    def __init__(self) -> None:
        self.writes: dict[str, dict[bytes, bytes | None]] = {}
        self.truncated: dict[str, None] = {}  # a dict keeps the order of the clears

    def __bool__(self) -> bool:
        return bool(self.writes or self.truncated)

    def put(self, table: str, key: bytes, value: bytes | None) -> None:
        """Write ``value`` at ``key`` (None: delete the key)."""
        self.writes.setdefault(table, {})[key] = value

    def truncate(self, table: str) -> None:
        """Clear ``table``: drop the writes buffered so far and everything below this layer."""
        self.writes.pop(table, None)
        self.truncated[table] = None

    def lookup(self, table: str, key: bytes) -> tuple[bool, bytes | None]:
        """(True, value) if this layer decides ``key`` (written or cleared), else (False, None)."""
        rows = self.writes.get(table)
        if rows is not None and key in rows:
            return True, rows[key]
        return table in self.truncated, None

    def merge(self, upper: WriteLayer) -> None:
        """Put ``upper`` (a later layer) on top of this one."""
        for table in upper.truncated:
            self.truncate(table)
        for table, rows in upper.writes.items():
            self.writes.setdefault(table, {}).update(rows)

    def clear(self) -> None:
        """Forget every write and clear."""
        self.writes = {}
        self.truncated = {}

    def table_writes(self) -> TableWrites:
        """A read-only copy of the writes, as ``StateStore.apply`` takes them."""
        return MappingProxyType(
            {table: MappingProxyType(dict(rows)) for table, rows in self.writes.items()}
        )

    def truncated_tables(self) -> frozenset[str]:
        """The cleared tables, as ``StateStore.apply`` takes them."""
        return frozenset(self.truncated) if self.truncated else _NONE_CLEARED


class LayeredReader:
    """Reads ``store`` with ``layers`` (lowest first) on top of it."""

    __slots__ = ("layers", "store")

    def __init__(self, store: StateStore, layers: Sequence[WriteLayer]) -> None:
        self.store = store
        self.layers = layers

    def get(self, table: str, key: bytes) -> bytes | None:
        """The encoded row at ``key``, or None."""
        for layer in reversed(self.layers):
            found, value = layer.lookup(table, key)
            if found:
                return value
        return self.store.get(table, key)

    def scan(self, table: str) -> Iterator[tuple[bytes, bytes]]:
        """All rows of ``table`` in key order, as of this call (later writes are not seen)."""
        overlay: dict[bytes, bytes | None] = {}
        cleared = False
        for layer in self.layers:
            if table in layer.truncated:
                overlay, cleared = {}, True
            overlay.update(layer.writes.get(table, {}))
        base = iter(()) if cleared else self.store.scan(table)
        return _merge(base, sorted(overlay.items()))


def _merge(
    base: Iterator[tuple[bytes, bytes]], upper: list[tuple[bytes, bytes | None]]
) -> Iterator[tuple[bytes, bytes]]:
    below = next(base, None)
    for key, value in upper:
        while below is not None and below[0] < key:
            yield below
            below = next(base, None)
        if below is not None and below[0] == key:
            below = next(base, None)
        if value is not None:
            yield key, value
    while below is not None:
        yield below
        below = next(base, None)
