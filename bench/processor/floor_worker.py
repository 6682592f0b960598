"""Floors: the counting job as a bare Python loop, with no processor framework at all.

``python -m bench.processor.floor_worker SPEC_JSON RESULT_JSON`` (``mode`` ``process`` only).
Each floor consumes the input, counts and sums per customer, produces one changelog record per
event and commits input offsets and changelog together in Kafka transactions, at the same
commit points as the processors. ``level`` says how much of our processor's per-event work
it does besides:

- ``bare``: state in a dict, a small JSON changelog value (what quixstreams writes);
- ``debezium``: state in RocksDB rows through the table's codec (``StateTable.check_and_encode``,
  ``decode_row``), written per commit, and the changelog value our processor writes (the
  Debezium envelope, schema included, from ``EventWriter``; source and transaction blocks).

No isolation of one event's writes from another's, no capture, no dead letters, no restore:
what is left is the cost of the work itself, the most any processor in this Python could reach.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from rocksdict import Rdict, WriteBatch

from bench.processor.ours_worker import _cpu
from cdc.connector.changelog import ChangelogConnector, InputOrigin, TransactionCounter
from cdc.events import Op
from cdc.examples import CENTS, PAYMENTS_PER_CUSTOMER
from cdc.state import Row

CHANGELOG = "changelog"


def _clients(spec: dict[str, Any], topic: str) -> tuple[Consumer, Producer]:
    boot, group = spec["bootstrap"], spec["group"]
    admin = AdminClient({"bootstrap.servers": boot})
    changelog = NewTopic(topic, spec["partitions"], 1, config={"cleanup.policy": "compact"})
    admin.create_topics([changelog])[topic].result()
    consumer = Consumer(
        {"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False,
         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
         "fetch.queue.backoff.ms": 10, "fetch.max.bytes": 16 << 20,
         "max.partition.fetch.bytes": 4 << 20}
    )  # fmt: skip
    producer = Producer(
        {"bootstrap.servers": boot, "transactional.id": group, "enable.idempotence": True,
         "acks": "all", "linger.ms": 5, "batch.size": 1 << 20, "compression.type": "lz4",
         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20,
         "partitioner": "murmur2_random"}
    )  # fmt: skip
    producer.init_transactions()
    consumer.assign([TopicPartition(spec["topic"], p, 0) for p in range(spec["partitions"])])
    return consumer, producer


class DebeziumFloor:
    """RocksDB rows and Debezium change events, as plain calls."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.table = PAYMENTS_PER_CUSTOMER
        Path(spec["state_dir"]).mkdir(parents=True, exist_ok=True)
        self.db = Rdict(tempfile.mkdtemp(dir=spec["state_dir"]))
        self.pending: dict[bytes, bytes] = {}
        connector = ChangelogConnector(spec["group"], [self.table], partitions=spec["partitions"])
        self.source = connector.source
        self.writer = connector._writers[self.table.name]
        self.txn = TransactionCounter(spec["group"], 1)

    def count(self, at: InputOrigin, customer: str, amount: Decimal) -> tuple[bytes, bytes]:
        """The changelog record (key, value) of one more payment of ``customer``."""
        key = customer.encode()
        stored = self.pending.get(key) or self.db.get(key)
        before: Row | None = None if stored is None else self.table.decode_row(stored)
        row = {
            "customer_id": customer,
            "payments": (before["payments"] if before else 0) + 1,
            "total_amount": (before["total_amount"] if before else Decimal("0.00")) + amount,
        }
        _, self.pending[key], after = self.table.check_and_encode(row)
        ts = int(time.time() * 1000)
        source = self.source(self.table.name, at, self.txn, ts, False)
        value = self.writer.value_of(
            Op.UPDATE if before else Op.CREATE, before, after, source,
            ts_ms=ts, transaction=self.txn.next(CHANGELOG),
        )  # fmt: skip
        return self.writer.key(after), value

    def commit(self) -> None:
        """Write the rows of this commit to RocksDB in one batch."""
        batch = WriteBatch()
        for key, value in self.pending.items():
            batch.put(key, value)
        self.db.write(batch)
        self.pending.clear()

    def dump(self) -> dict[str, list[object]]:
        """The final state, for the driver to check."""
        rows = (self.table.decode_row(v) for k, v in self.db.items())
        return {r["customer_id"]: [r["payments"], str(r["total_amount"])] for r in rows}


class BareFloor:
    """State in a dict, a small JSON changelog value."""

    def __init__(self) -> None:
        self.state: dict[str, tuple[int, Decimal]] = {}

    def count(self, at: InputOrigin, customer: str, amount: Decimal) -> tuple[bytes, bytes]:
        """The changelog record (key, value) of one more payment of ``customer``."""
        payments, total = self.state.get(customer, (0, Decimal("0.00")))
        payments, total = self.state[customer] = (payments + 1, total + amount)
        row = {"customer_id": customer, "payments": payments, "total_amount": str(total)}
        return customer.encode(), orjson.dumps(row)

    def commit(self) -> None:
        """Nothing to write: the dict is the state."""

    def dump(self) -> dict[str, list[object]]:
        """The final state, for the driver to check."""
        return {c: [n, str(total)] for c, (n, total) in self.state.items()}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Count the whole input once; the measurement and the final state."""
    floor = DebeziumFloor(spec) if spec["level"] == "debezium" else BareFloor()
    topic = f"{spec['group']}.{CHANGELOG}"
    consumer, producer = _clients(spec, topic)
    events, pending, limit = 0, 0, spec["events"]
    first, first_cpu, last_commit = 0.0, 0.0, time.monotonic()
    producer.begin_transaction()
    while events < limit:
        for msg in consumer.consume(min(spec["commit_max_events"] - pending, limit - events), 0.2):
            if msg.error() is not None:
                raise RuntimeError(f"{msg.topic()}/{msg.partition()}: {msg.error()}")
            if not first:
                first, first_cpu = time.monotonic(), _cpu()
            payment = orjson.loads(msg.value() or b"null")  # the checks of count_payment
            if not isinstance(payment, dict) or not payment.get("customer_id"):
                raise ValueError("a payment needs a customer_id")
            amount = Decimal(str(payment.get("amount")))
            if not amount.is_finite() or amount < 0:
                raise ValueError(f"bad amount {amount}")
            partition, offset = msg.partition() or 0, msg.offset() or 0
            at = InputOrigin(spec["topic"], partition, offset, offset + 1)
            key, value = floor.count(at, str(payment["customer_id"]), amount.quantize(CENTS))
            producer.produce(topic, value, key)
            events, pending = events + 1, pending + 1
        due = time.monotonic() - last_commit >= spec["commit_interval_s"]
        if pending and (pending >= spec["commit_max_events"] or due or events >= limit):
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
            producer.commit_transaction()
            floor.commit()
            if events < limit:
                producer.begin_transaction()
            pending, last_commit = 0, time.monotonic()
    seconds = time.monotonic() - first
    consumer.close()
    return {
        "mode": "process",
        "events": events,
        "seconds": seconds,
        "measured_cpu_s": _cpu() - first_cpu,
        "events_per_s": events / seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "state": floor.dump(),
    }


def main(spec_path: str, result_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    Path(result_path).write_text(json.dumps(run(spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
