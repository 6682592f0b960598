"""The state tables of one processor over its store: transactions, committed reads and apply.

The flow of one processor step::

    with tables.transaction() as tx:          # the user's function reads and writes state
        tx[orders].put({...})
    events = connector.to_events(tx.changes)  # captured changes -> changelog records
    positions = writer.commit(...)            # the changelog transaction commits, then
    tables.apply(positions)                   # store.apply(tx.writes, positions, tx.truncated)

Committed transactions are held as a pending layer that later transactions and ``view`` read
through, so several transactions may share one changelog commit; ``apply`` hands them to the
store as one atomic apply, and ``discard`` drops them when the changelog commit failed. Apply
through ``tables.apply``, not ``store.apply``, so the pending layer is emptied with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

from cdc.state.changes import CapturedChange, ChangeKind
from cdc.state.errors import StateTransactionError
from cdc.state.overlay import LayeredReader, WriteLayer
from cdc.state.protocol import StateStore, TableWrites
from cdc.state.table import StateTable
from cdc.state.transaction import StateTransaction, TableView, TxState
from cdc.streams.protocol import TopicPartition


class StateTables:
    """Declared ``tables`` over ``store``; one transaction at a time (not thread-safe)."""

    def __init__(self, store: StateStore, tables: Iterable[StateTable]) -> None:
        self.store = store
        by_name: dict[str, StateTable] = {}
        for table in tables:
            if table.name in by_name:
                raise ValueError(f"state table {table.name!r} is declared twice")
            by_name[table.name] = table
        self.tables: Mapping[str, StateTable] = MappingProxyType(by_name)
        self._pending = WriteLayer()
        self._committed = LayeredReader(store, [self._pending])
        self._open: StateTransaction | None = None

    def begin(self) -> StateTransaction:
        """Start a transaction; end it with ``commit()`` or ``abort()``."""
        if self._open is not None:
            raise StateTransactionError("a state transaction is already open")
        self._open = StateTransaction(self.tables, self._committed, self._ended)
        return self._open

    @contextmanager
    def transaction(self) -> Iterator[StateTransaction]:
        """A transaction that commits when the block ends and aborts if it raises."""
        tx = self.begin()
        try:
            yield tx
        except BaseException:
            if tx.state is TxState.OPEN:
                tx.abort()
            raise
        if tx.state is TxState.OPEN:
            tx.commit()

    def view(self, table: StateTable | str) -> TableView:
        """Read-only access to the committed rows of ``table`` (applied or pending)."""
        return TableView(self._table(table), self._committed)

    def snapshot(self, *tables: StateTable | str) -> Iterator[CapturedChange]:
        """Every committed row of ``tables`` (default: all) as a read change, in key order."""
        for table in [self._table(t) for t in tables or self.tables]:
            for data in self.view(table).scan():
                key = {c: data[c] for c in table.key}
                yield CapturedChange(table.name, key, None, data, ChangeKind.READ)

    @property
    def pending_writes(self) -> TableWrites:
        """The writes of the transactions committed since the last ``apply``, merged."""
        return self._pending.table_writes()

    @property
    def pending_truncated(self) -> frozenset[str]:
        """The tables cleared by the transactions committed since the last ``apply``."""
        return self._pending.truncated_tables()

    def apply(self, checkpoint: Mapping[TopicPartition, int]) -> None:
        """Apply the committed transactions to the store at changelog ``checkpoint``, atomically.

        Call it once the changelog records of those transactions are committed.
        """
        writes, truncated = self._pending.writes, self._pending.truncated_tables()
        self.store.apply(writes, checkpoint, truncated)
        self._pending.clear()

    def discard(self) -> None:
        """Forget the transactions committed since the last ``apply`` (changelog commit failed)."""
        if self._open is not None:
            raise StateTransactionError("cannot discard while a state transaction is open")
        self._pending.clear()

    def _ended(self, committed: WriteLayer | None) -> None:
        if committed is not None:
            self._pending.merge(committed)
        self._open = None

    def _table(self, table: StateTable | str) -> StateTable:
        name = table if isinstance(table, str) else table.name
        if name not in self.tables:
            raise KeyError(f"no state table {name!r}; declared: {sorted(self.tables)}")
        return self.tables[name]
