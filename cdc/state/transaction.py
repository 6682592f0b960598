"""State transactions: the unit of work of the user's processor function over its state tables.

Reads in a transaction see its own writes; nothing it writes is seen by anyone else until it
commits, and an abort forgets it. Committing captures one change per key written (several
writes of a key collapse into one), after a truncate change for each table cleared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from typing import Any

from cdc.state.changes import CapturedChange, ChangeKind, Row
from cdc.state.errors import StateTransactionError
from cdc.state.overlay import LayeredReader, WriteLayer
from cdc.state.protocol import TableWrites
from cdc.state.table import StateTable


class TableView:
    """Read access to one state table through a reader (committed state, or a transaction's)."""

    __slots__ = ("_reader", "table")

    def __init__(self, table: StateTable, reader: LayeredReader | None) -> None:
        self.table = table
        self._reader = reader

    def get(self, key: object) -> Row | None:
        """The row with primary key ``key`` (a dict, a tuple or a bare value), or None."""
        self._check_open()
        data = self._layers().get(self.table.name, self.table.encode_key(key))
        return None if data is None else self.table.decode_row(data)

    def scan(self) -> Iterator[Row]:
        """Every row in primary-key order, as of this call."""
        self._check_open()
        return _decoded(self.table, self._layers().scan(self.table.name))

    def _layers(self) -> LayeredReader:
        assert self._reader is not None  # a TableHandle reads through its transaction instead
        return self._reader

    def _check_open(self) -> None:
        pass


def _decoded(table: StateTable, rows: Iterator[tuple[bytes, bytes]]) -> Iterator[Row]:
    decode = table.decode_row
    for _, data in rows:
        yield decode(data)


class TableHandle(TableView):
    """One state table inside a transaction: ``get``, ``scan``, ``put``, ``delete``, ``clear``."""

    __slots__ = ("_tx",)

    def __init__(self, table: StateTable, tx: StateTransaction) -> None:
        # No reader of its own (``_layers`` is the transaction's, made on the first scan):
        # building one per handle cost more than the per-event get it would serve.
        self.table = table
        self._reader = None
        self._tx = tx

    def get(self, key: object) -> Row | None:
        """The row with primary key ``key`` (a dict, a tuple or a bare value), or None."""
        tx, table = self._tx, self.table
        if tx.state is not _OPEN:
            tx._check_open()
        name, encoded = table.name, table.encode_key(key)
        layer = tx._layer  # WriteLayer.lookup inlined: this is the processor's per-event read
        rows = layer.writes.get(name)
        if rows is not None and encoded in rows:  # the transaction's own write
            data = rows[encoded]
            return None if data is None else table.decode_row(data)
        if name in layer.truncated:
            return None
        data = tx.committed_get(name, encoded)
        if data is None:
            return None
        row = table.decode_row(data)
        if not table.mutable_values:  # kept as the before image the commit captures
            tx._before[name, encoded] = row
            return dict(row)
        return row

    def put(self, row: Mapping[str, Any]) -> None:
        """Insert or replace ``row`` (its primary-key columns say which row)."""
        tx = self._tx
        if tx.state is not _OPEN:
            tx._check_open()
        key, data, checked = self.table.check_and_encode(row)
        tx._write(self.table.name, key, data, checked)

    def delete(self, key: object) -> None:
        """Delete the row with primary key ``key`` (nothing happens if there is none)."""
        self._check_open()
        self._tx._write(self.table.name, self.table.encode_key(key), None)

    def clear(self) -> None:
        """Delete every row of the table (captured as one truncate change)."""
        self._check_open()
        self._tx._write(self.table.name, None, None)

    def _layers(self) -> LayeredReader:
        return self._tx.reader

    def _check_open(self) -> None:
        self._tx._check_open()


class TxState(Enum):
    """Where a transaction is in its life."""

    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


_OPEN = TxState.OPEN


class StateTransaction:
    """A unit of writes over several state tables; made by ``StateTables.transaction()``.

    ``on_end`` is called with the transaction's write layer when it commits, None if it aborts.

    After ``commit``: ``changes`` are the captured changes (for the changelog) and ``writes``
    and ``truncated`` the encoded writes for ``StateStore.apply``.
    """

    def __init__(
        self,
        tables: Mapping[str, StateTable],
        committed: LayeredReader,
        on_end: Callable[[WriteLayer | None], None],
    ) -> None:
        self._tables = tables
        self._on_end = on_end
        self._layer = WriteLayer()
        self._committed = committed
        self._reader: LayeredReader | None = None
        self._seen: dict[tuple[str, bytes], bytes | None] = {}
        """What the transaction read of the committed state (which cannot change while it is
        open: applying moves pending writes into the store, the same rows), so capturing the
        changes at commit does not look the keys up again."""
        self.state = _OPEN
        self.changes: list[CapturedChange] = []
        self._preview: list[CapturedChange] | None = None
        self._before: dict[tuple[str, bytes], Row] = {}
        """Committed rows read, decoded (their ``before`` images, not decoded again)."""
        self._after: dict[tuple[str, bytes], Row | None] = {}
        """The checked row of each key written (the ``after`` image that was encoded)."""

    @property
    def reader(self) -> LayeredReader:
        """Reads through the transaction's writes onto the committed state (for scans)."""
        if self._reader is None:
            committed = self._committed
            self._reader = LayeredReader(committed.store, [*committed.layers, self._layer])
        return self._reader

    def committed_get(self, table: str, key: bytes) -> bytes | None:
        """The committed row at ``key`` (the transaction's own writes not seen)."""
        where = (table, key)
        seen = self._seen
        if where in seen:
            return seen[where]
        value = seen[where] = self._committed.get(table, key)
        return value

    def table(self, table: StateTable | str) -> TableHandle:
        """The handle to read and write ``table`` in this transaction."""
        name = table if isinstance(table, str) else table.name
        if name not in self._tables:
            raise KeyError(f"no state table {name!r}; declared: {sorted(self._tables)}")
        return TableHandle(self._tables[name], self)

    def __getitem__(self, table: StateTable | str) -> TableHandle:
        """``tx[table]``: the same as ``tx.table(table)``."""
        return self.table(table)

    @property
    def writes(self) -> TableWrites:
        """The encoded writes: per table, per key, the final row (None: deleted)."""
        return self._layer.table_writes()

    @property
    def truncated(self) -> frozenset[str]:
        """The tables this transaction cleared (before its writes)."""
        return self._layer.truncated_tables()

    def preview(self) -> list[CapturedChange]:
        """The changes ``commit`` would return now, without ending the transaction."""
        self._check_open()
        if self._preview is None:
            self._preview = self._capture()
        return list(self._preview)

    def commit(self) -> list[CapturedChange]:
        """End the transaction, making its writes the committed state; return its changes."""
        self._check_open()
        try:
            self.changes = self._preview if self._preview is not None else self._capture()
        except BaseException:
            self.abort()
            raise
        self.state = TxState.COMMITTED
        self._on_end(self._layer)
        return self.changes

    def abort(self) -> None:
        """End the transaction, forgetting its writes."""
        self._check_open()
        self._layer.clear()
        self.state = TxState.ABORTED
        self._on_end(None)

    def _write(
        self, table: str, key: bytes | None, value: bytes | None, row: Row | None = None
    ) -> None:
        """Buffer a put of ``value`` (checked as ``row``; a delete if ``value`` is None), or
        clear ``table`` if ``key`` is None."""
        self._preview = None
        if key is None:
            self._layer.truncate(table)
            self._after = {where: r for where, r in self._after.items() if where[0] != table}
        else:
            self._layer.put(table, key, value)
            self._after[table, key] = row

    def _capture(self) -> list[CapturedChange]:
        layer = self._layer
        changes = [CapturedChange(t, {}, None, None, ChangeKind.TRUNCATE) for t in layer.truncated]
        for name, rows in layer.writes.items():
            table = self._tables[name]
            cleared = name in layer.truncated
            for key, after in rows.items():
                before = None if cleared else self.committed_get(name, key)
                if before == after:  # no-op: a put then delete of a new key, or the same row
                    continue
                before_row = None if before is None else self._before.get((name, key))
                if before is not None and before_row is None:
                    before_row = table.decode_row(before)
                after_row = None if after is None else self._after.get((name, key))
                if after is not None and after_row is None:
                    after_row = table.decode_row(after)
                image = after_row if after_row is not None else before_row
                if table.canonical_keys and image is not None:
                    key_row = {c: image[c] for c in table.key}
                else:
                    key_row = table.decode_key(key)
                changes.append(CapturedChange.between(name, key_row, before_row, after_row))
        return changes

    def _check_open(self) -> None:
        if self.state is not _OPEN:
            raise StateTransactionError(f"the state transaction is {self.state.value}")
