"""The benchmark's changelog: the processor's own change events, produced fast to Kafka.

The topic is what ``EventProcessor`` writes for ``cdc.examples.PAYMENTS_PER_CUSTOMER`` with
``schemas_enable=False``: Debezium envelopes (``ReplicatorSource`` block, transaction block),
keyed by ``{"customer_id": ...}``, murmur2-partitioned, lz4-compressed, a delete followed by a
tombstone. Event ``i`` touches key ``(i * STRIDE) % keys`` (every key once per round): the first
touch creates the row, every 50th event deletes it (``d`` + tombstone), the others update it
(``u`` with the before image). Values are formatted from templates, not through ``EventWriter``
(10 M events would take 20 minutes that way); ``check_templates`` asserts the bytes equal what
``ChangelogConnector.encode`` writes for the same changes.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from cdc.connector.changelog import (
    PRODUCT_VERSION,
    ChangelogConnector,
    InputOrigin,
    TransactionCounter,
)
from cdc.connector.spec import table_spec
from cdc.events.columns import TableSpec
from cdc.examples import PAYMENTS_PER_CUSTOMER
from cdc.state.changes import CapturedChange, ChangeKind

PROCESSOR = "bench"
TABLE = PAYMENTS_PER_CUSTOMER.name
TOPIC = f"{PROCESSOR}.{TABLE}"
STRIDE = 7_919
COMMIT_EVERY = 1_000
"""Events per processor transaction (``commit_seq``, ``total_order``)."""
TS_MS = 1_795_000_000_000
TOPIC_CONFIG = {
    # A changelog topic is compacted; the cleaner is kept off it for the run (a record becomes
    # eligible only after min.compaction.lag.ms), so every contender reads every record.
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": str(2**63 - 1),
    "retention.ms": "-1",
}


def declared_spec() -> TableSpec:
    """The declared table shape (records carry no schema)."""
    return table_spec(PROCESSOR, PAYMENTS_PER_CUSTOMER)


def _decimal(cents: int) -> str:
    return base64.b64encode(
        cents.to_bytes((cents.bit_length() + 8) // 8, "big", signed=True)
    ).decode()


def _row(key: str, payments: int, cents: int) -> str:
    return f'{{"customer_id":"{key}","payments":{payments},"total_amount":"{_decimal(cents)}"}}'


def _value(i: int, op: str, before: str, after: str) -> bytes:
    seq, order, ts = i // COMMIT_EVERY + 1, i % COMMIT_EVERY + 1, TS_MS + i // COMMIT_EVERY
    txn = f"{PROCESSOR}:{seq}"
    return (
        f'{{"before":{before},"after":{after},"source":{{"version":"{PRODUCT_VERSION}",'
        f'"connector":"replicator","name":"{PROCESSOR}","ts_ms":{ts},"ts_us":null,"ts_ns":null,'
        f'"snapshot":"false","db":"{PROCESSOR}","sequence":null,"table":"{TABLE}",'
        f'"processor_id":"{PROCESSOR}","input_topic":"payments","input_partition":{i % 4},'
        f'"input_offset_start":{i // 4},"input_offset_end":{i // 4 + 1},'
        f'"transaction_id":"{txn}","commit_seq":{seq}}},"op":"{op}","ts_ms":{ts},"ts_us":null,'
        f'"ts_ns":null,"transaction":{{"id":"{txn}","total_order":{order},'
        f'"data_collection_order":{order}}}}}'
    ).encode()


@dataclass
class Summary:
    """What a correct rebuild holds: live rows, and the sums of their columns."""

    records: int = 0
    events: int = 0
    rows: int = 0
    payments: int = 0
    cents: int = 0


def changelog(events: int, keys: int, summary: Summary) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) records of ``events`` change events (plus tombstones), filling ``summary``."""
    payments, cents = [0] * keys, [0] * keys
    for i in range(events):
        k = (i * STRIDE) % keys
        name = f"c{k:07d}"
        key = f'{{"customer_id":"{name}"}}'.encode()
        count = payments[k]
        if count == 0:
            payments[k], cents[k] = 1, 100 + i % 5000
            yield key, _value(i, "c", "null", _row(name, 1, cents[k]))
        elif i % 50 == 0:
            yield key, _value(i, "d", _row(name, count, cents[k]), "null")
            yield key, None
            summary.records += 1
            payments[k] = cents[k] = 0
        else:
            before = _row(name, count, cents[k])
            payments[k], cents[k] = count + 1, cents[k] + 100 + i % 5000
            yield key, _value(i, "u", before, _row(name, count + 1, cents[k]))
        summary.records += 1
    summary.events = events
    summary.rows = sum(1 for p in payments if p)
    summary.payments, summary.cents = sum(payments), sum(cents)


def check_templates() -> None:
    """The template bytes equal ``ChangelogConnector.encode`` for a create, an update and a
    delete (the source ``ts_ms``, wall-clock time in the connector, aside)."""
    connector = ChangelogConnector(PROCESSOR, [PAYMENTS_PER_CUSTOMER], schemas_enable=False)
    records = list(changelog(51, 2, Summary()))
    kinds = {0: ChangeKind.CREATE, 2: ChangeKind.UPDATE, 50: ChangeKind.DELETE}
    for i, kind in kinds.items():  # with 2 keys, record i is event i up to the first delete
        key, value = records[i]
        assert value is not None
        before, after = _images(value)
        image = after or before
        assert image is not None
        change = CapturedChange(TABLE, {"customer_id": image["customer_id"]}, before, after, kind)
        counter = TransactionCounter(PROCESSOR, i // COMMIT_EVERY + 1)
        counter.total = counter.per_collection[TOPIC] = i % COMMIT_EVERY
        origin = InputOrigin("payments", i % 4, i // 4, i // 4 + 1)
        out = connector.encode([change], origin, counter)[0]
        expected = re.sub(
            rb'"ts_ms":\d+', b'"ts_ms":%d' % (TS_MS + i // COMMIT_EVERY), out.value or b""
        )
        assert (out.key, expected) == (key, value), f"template differs at event {i}: {value!r}"


def _images(value: bytes) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    parsed = json.loads(value)

    def row(image: dict[str, object] | None) -> dict[str, object] | None:
        if image is None:
            return None
        cents = int.from_bytes(base64.b64decode(str(image["total_amount"])), "big", signed=True)
        return {**image, "total_amount": Decimal(cents).scaleb(-2)}

    return row(parsed["before"]), row(parsed["after"])


def produce(bootstrap: str, events: int, keys: int, partitions: int) -> Summary:
    """Create the topic and produce the changelog (lz4, murmur2 partitioning, as the processor)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, num_partitions=partitions, replication_factor=1, config=TOPIC_CONFIG)
    admin.create_topics([topic])[TOPIC].result()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "compression.type": "lz4",
            "linger.ms": 50,
            "batch.size": 1024 * 1024,
            "acks": "all",
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2 * 1024 * 1024,
        }
    )
    summary = Summary()
    send = producer.produce
    for n, (key, value) in enumerate(changelog(events, keys, summary)):
        while True:
            try:
                send(TOPIC, value, key)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 20_000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    time.sleep(0.5)
    return summary
