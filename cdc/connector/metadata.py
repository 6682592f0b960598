"""Transaction metadata events (Debezium's BEGIN/END on ``<processor>.transaction``).

Every processor commit writes BEGIN before its change events and END after them, with the event
count per data collection (changelog topic), so a reader can apply a commit atomically.
"""

from __future__ import annotations

import json
import time

from cdc.connector.changelog import ChangelogConnector, OutRecord, TransactionCounter


def _record(
    connector: ChangelogConnector, txn: TransactionCounter, payload: dict[str, object]
) -> OutRecord:
    key = json.dumps({"id": txn.txn_id}, separators=(",", ":")).encode()
    value = json.dumps(payload, separators=(",", ":")).encode()
    return OutRecord(connector.transaction_topic, key, value, 0)


def begin_record(connector: ChangelogConnector, txn: TransactionCounter) -> OutRecord:
    """The BEGIN event of ``txn``."""
    return _record(
        connector,
        txn,
        {
            "status": "BEGIN",
            "id": txn.txn_id,
            "event_count": None,
            "data_collections": None,
            "ts_ms": int(time.time() * 1000),
        },
    )


def end_record(connector: ChangelogConnector, txn: TransactionCounter) -> OutRecord:
    """The END event of ``txn``, counting the events it wrote per changelog topic."""
    return _record(
        connector,
        txn,
        {
            "status": "END",
            "id": txn.txn_id,
            "event_count": txn.total,
            "data_collections": [
                {"data_collection": name, "event_count": count}
                for name, count in sorted(txn.per_collection.items())
            ],
            "ts_ms": int(time.time() * 1000),
        },
    )


def last_commit_seq(values: list[bytes | None]) -> int:
    """The highest commit sequence among transaction-topic values (0 when there is none)."""
    best = 0
    for value in values:
        if not value:
            continue
        ident = str(json.loads(value).get("id", ""))
        _, _, seq = ident.rpartition(":")
        if seq.isdigit():
            best = max(best, int(seq))
    return best
