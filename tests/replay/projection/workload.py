"""A ``movie_ticket_sales`` change topic written by the event source connector from random
workloads (inserts, updates, deletes, truncates), for the projection engine tests."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from cdc.connector.changelog import ChangelogConnector, InputOrigin, TransactionCounter
from cdc.state.changes import CapturedChange, ChangeKind, Row
from cdc.state.table import StateTable
from cdc.streams.protocol import EventStream
from projections.change_ops import RowChange

PROCESSOR = "shop"
SALES = StateTable(
    "movie_ticket_sales",
    {
        "id": int,
        "title": str,
        "region": str,
        "total_ticket_value": Decimal,
        "seats": int,
        "refunded": bool,
    },
    key="id",
    scales={"total_ticket_value": 2},
)
TOPIC = f"{PROCESSOR}.{SALES.name}"
# Each example costs Spark jobs per batch: few examples, and no shrinking (a failure prints its
# example as generated).
FEW = settings(
    max_examples=2,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class SalesTopic:
    """Writes changes of a state table (``SALES``) to its changelog topic as the processor
    would: one stream transaction per call of :meth:`write` (a truncate in one of its own,
    followed by a delete of every row). A delete's before image is the change's, if given."""

    def __init__(self, stream: EventStream, partitions: int = 2, table: StateTable = SALES) -> None:
        self.stream, self.table, self.partitions = stream, table, partitions
        self.connector = ChangelogConnector(PROCESSOR, [table], partitions=partitions)
        self.topic = self.connector.topics[table.name]
        stream.ensure_topic(self.topic, partitions)
        self.rows: dict[Any, Row] = {}
        self.seq = 0
        self._writer = stream.writer(f"{PROCESSOR}-{table.name}-feeder")

    def write(self, changes: Iterable[RowChange]) -> None:
        """Append ``changes`` (c/u/d/t with images) in one transaction (truncates apart)."""
        pending: list[RowChange] = []
        for change in changes:
            if change.op == "t":
                self._commit(pending)
                self._commit([change])
                pending = []
            else:
                pending.append(change)
        self._commit(pending)

    def _commit(self, changes: list[RowChange]) -> None:
        if not changes:
            return
        self.seq += 1
        txn = TransactionCounter(PROCESSOR, self.seq)
        origin = InputOrigin("input", 0, self.seq, self.seq + 1)
        self._writer.begin()
        for change in changes:
            cleared = None
            if change.op == "t":
                captured = CapturedChange(self.table.name, {}, None, None, ChangeKind.TRUNCATE)
                cleared = {self.table.name: list(self.rows.values())}
                self.rows.clear()
            else:
                image = change.after if change.after is not None else change.before
                assert image is not None
                row_key = {k: image[k] for k in self.table.key}
                stored = self.rows.get(tuple(row_key.values()))
                before = change.before if change.after is None and change.before else stored
                if change.after is None and before is None:
                    before = dict(image)
                captured = CapturedChange.between(self.table.name, row_key, before, change.after)
                if change.after is None:
                    self.rows.pop(tuple(row_key.values()), None)
                else:
                    self.rows[tuple(row_key.values())] = dict(change.after)
            for out in self.connector.encode([captured], origin, txn, cleared):
                self._writer.send(out.topic, out.key, out.value, partition=out.partition)
        self._writer.commit()

    def close(self) -> None:
        self._writer.close()
