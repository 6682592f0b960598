"""Transaction metadata: the ``transaction`` block of data events and BEGIN/END events.

With ``provide.transaction.metadata=true`` Debezium writes a BEGIN and an END event per source
transaction to the ``<prefix>.transaction`` topic, and gives every data event a ``transaction``
block. The END's ``event_count`` and per-table ``data_collections`` counts tell a consumer when it
has seen the whole transaction. Ids are connector specific: PostgreSQL ``"<txId>:<lsn>"`` (BEGIN
and END share only the txId prefix), MySQL the GTID.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class TransactionBlock(BaseModel):
    """The ``transaction`` block of a data event: its transaction and place in it (from 1)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    id: str
    total_order: int
    data_collection_order: int


class DataCollectionCount(BaseModel):
    """How many events of one table (``"schema.table"`` or ``"db.table"``) a transaction had."""

    model_config = ConfigDict(frozen=True, extra="allow")

    data_collection: str
    event_count: int


class TransactionEvent(BaseModel):
    """A BEGIN or END event of the transaction metadata topic (counts only on END)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: Literal["transaction"] = "transaction"
    status: Literal["BEGIN", "END"]
    id: str
    event_count: int | None = None
    data_collections: tuple[DataCollectionCount, ...] | None = None
    ts_ms: int | None = None

    @property
    def is_begin(self) -> bool:
        """True for BEGIN, False for END."""
        return self.status == "BEGIN"
