"""Local state of a processor: stores (memory, RocksDB), typed state tables and transactions."""

from cdc.state.changes import CapturedChange, ChangeKind, Row
from cdc.state.errors import (
    CorruptStateStoreError,
    StateStoreBusyError,
    StateStoreError,
    StateTransactionError,
)
from cdc.state.protocol import StateStore, TableWrites
from cdc.state.restore import apply_changelog_batch
from cdc.state.stores import destroy_state_store, open_state_store
from cdc.state.table import StateTable
from cdc.state.tables import StateTables
from cdc.state.transaction import StateTransaction, TableHandle, TableView

__all__ = [
    "CapturedChange",
    "ChangeKind",
    "CorruptStateStoreError",
    "Row",
    "StateStore",
    "StateStoreBusyError",
    "StateStoreError",
    "StateTable",
    "StateTables",
    "StateTransaction",
    "StateTransactionError",
    "TableHandle",
    "TableView",
    "TableWrites",
    "apply_changelog_batch",
    "destroy_state_store",
    "open_state_store",
]
