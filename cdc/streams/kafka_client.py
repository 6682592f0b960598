"""The one module that imports confluent-kafka: client construction and error translation.

Other modules build Kafka clients through these functions and never import confluent-kafka.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic

__all__ = [
    "AdminClient",
    "ConfigResource",
    "Consumer",
    "KafkaError",
    "KafkaException",
    "KafkaPartition",
    "Message",
    "NewTopic",
    "Producer",
    "end_offsets",
    "group_assignment",
    "is_retriable_abort",
    "is_settling",
    "make_admin",
    "make_consumer",
    "make_plain_producer",
    "make_producer",
    "watermarks",
]

CLIENT_LOG = logging.getLogger("replicator.kafka")
"""librdkafka's own log (each failed connection, each refused login), which it would otherwise
print to stderr: the command line shows it only with ``--debug``, its errors being ours."""

Config = Mapping[str, object]
"""librdkafka settings (values: strings, numbers, booleans, or callbacks such as ``error_cb``)."""


def make_admin(bootstrap: str, extra: Config) -> AdminClient:
    """An admin client for topic creation and metadata."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG, **extra}
    return AdminClient(config)


def group_assignment(
    admin: AdminClient, group: str, timeout_s: float
) -> list[tuple[str, str, int]]:
    """``(member, topic, partition)`` of every partition consumer group ``group`` has assigned
    now; a member is named by its ``group.instance.id`` (static membership), else its member id.
    An unknown or empty group has none."""
    futures = admin.describe_consumer_groups([group], request_timeout=timeout_s)
    description = futures[group].result()
    out = []
    for member in description.members:
        name = member.group_instance_id or member.member_id
        assigned = member.assignment.topic_partitions if member.assignment else []
        out += [(name, tp.topic, tp.partition) for tp in assigned]
    return out


PROCESSOR_PREFETCH_KBYTES = 256 * 1024
"""Fetched-ahead records per partition of a consumer group's reader (the processor's input)."""
READ_PREFETCH_KBYTES = 32 * 1024
"""The same for group-less readers (bounded reads, restores): enough to keep the fetcher busy,
small enough that reading many large changelog partitions at once stays within memory."""


FETCH_QUEUE_BACKOFF_MS = 10
"""How long a partition's fetching pauses once its queue is full. librdkafka's default, 1 s, left
restores (which drain 32 MB in ~0.1 s) idle most of the time; at 100 ms a bounded read of one
partition still waited a third of its time for the fetcher (2 M records: 3.9 s against 2.4 s,
for the same CPU)."""
BOUNDED_READ_FETCH_WAIT_MS = 25
"""How long the broker may hold a group-less reader's fetch. A read-committed reader learns it
is at the end only from a fetch that finds nothing new, held for the default 500 ms: every
bounded read of a transactional topic paid that in full."""
FETCH_MAX_BYTES = 16 * 1024 * 1024
"""Compressed bytes per fetch response. librdkafka decompresses a whole response at once, and
lz4 change events shrink ~20x: a 64 MB fetch of a schemas-on changelog held 1.3 GB in memory
and restored no faster."""


def make_consumer(
    bootstrap: str, group: str | None, extra: Config, *, prefetch_kbytes: int | None = None
) -> Consumer:
    """A read-committed consumer that never commits on its own (positions are committed in
    producer transactions), reporting partition EOF so bounded reads know where to stop."""
    if prefetch_kbytes is None:
        prefetch_kbytes = PROCESSOR_PREFETCH_KBYTES if group else READ_PREFETCH_KBYTES
    # Records librdkafka tries to keep queued per partition (its default, 100,000, is 300 MB
    # of 3 KB change events); the kilobyte limit above takes precedence.
    min_records = 100_000 if group else 10_000
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"replicator-reader-{uuid.uuid4().hex}",
            "logger": CLIENT_LOG,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": FETCH_MAX_BYTES // 4,
            "queued.max.messages.kbytes": prefetch_kbytes,
            "queued.min.messages": min_records,
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
            **({} if group else {"fetch.wait.max.ms": BOUNDED_READ_FETCH_WAIT_MS}),
            **extra,
        }
    )


def make_producer(bootstrap: str, transactional_id: str, extra: Config) -> Producer:
    """An idempotent, transactional producer partitioning keys like Java clients (murmur2)."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "logger": CLIENT_LOG,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1024 * 1024,
            "transaction.timeout.ms": 60_000,
            **extra,
        }
    )


def make_plain_producer(bootstrap: str, extra: Config) -> Producer:
    """An idempotent, non-transactional producer partitioning keys like Kafka Connect's (murmur2),
    for forwarding records another system wrote (the Debezium capture)."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "compression.type": "lz4",
            "logger": CLIENT_LOG,
            **extra,
        }
    )


def watermarks(
    consumer: Consumer, topic: str, partition: int, timeout_s: float = 30.0
) -> tuple[int, int]:
    """(low, high) offsets of a partition (high is the last stable offset for a read-committed
    consumer), retrying the transient errors of a topic that was just created."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                KafkaPartition(topic, partition), timeout=timeout_s, cached=False
            )
            return int(low), int(high)
        except KafkaException as exc:
            err = kafka_error(exc)
            retriable = err is not None and (err.retriable() or err.code() in _METADATA_SETTLING)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]


def end_offsets(
    admin: AdminClient,
    partitions: Collection[tuple[str, int]],
    *,
    committed: bool = True,
    timeout_s: float = 30.0,
) -> dict[tuple[str, int], int]:
    """The end of each partition: with ``committed`` its last stable offset (what
    read-committed readers see up to), else its high watermark; in one request per partition
    leader where ``watermarks`` takes two per partition."""
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets(
        {KafkaPartition(topic, partition): _LATEST for topic, partition in partitions},
        isolation_level=level,
        request_timeout=timeout_s,
    )
    return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}


_METADATA_SETTLING = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
)


def is_settling(err: KafkaError) -> bool:
    """Whether ``err`` is metadata still settling (a new topic, a leader being elected)."""
    return err.code() in _METADATA_SETTLING


def is_partition_dropped(err: KafkaError) -> bool:
    """Whether ``err`` is librdkafka's own "Unknown partition": a metadata request for a
    partition of a listed topic gets it while the topic's only broker stops (the client's
    metadata loses the partition with its leader)."""
    return err.code() == KafkaError._UNKNOWN_PARTITION


def kafka_error(exc: KafkaException) -> KafkaError | None:
    """The ``KafkaError`` an exception of the client carries, None if it carries none."""
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def is_retriable_abort(exc: KafkaException) -> bool:
    """True when the transaction failed but the producer can abort and try again."""
    err = kafka_error(exc)
    return bool(err is not None and err.txn_requires_abort())
