"""The event-stream extension point: one small protocol, implemented by Kafka and the local log.

Offset convention, everywhere in the product: a stored *position* is the next offset to
process. ``bounds().end`` is the next offset that will be written (the committed end, i.e. the
last stable offset for read-committed readers).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class TransactionLostError(RuntimeError):
    """A transaction could not be committed (failed, or its writer was fenced): nothing of it
    is visible, and the records it consumed are to be processed again."""


class CompactionOverBudget(RuntimeError):
    """A compacted read held more value bytes than it was allowed (``read_compacted``)."""

    def __init__(self, topic: str, partition: int, held_bytes: int, records: int) -> None:
        super().__init__(
            f"{topic} partition {partition} holds {held_bytes:,} bytes of newest values after "
            f"{records:,} records"
        )
        self.topic, self.partition = topic, partition
        self.held_bytes, self.records = held_bytes, records


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class StreamRecord(NamedTuple):
    """One committed record of a stream. ``value`` None is a tombstone.

    A named tuple, not a dataclass: readers build one per record, and a frozen dataclass's
    ``__init__`` costs three times as much."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()


class CompactedRange(NamedTuple):
    """What a compaction of a range of one partition keeps (``EventStream.read_compacted``).

    ``live``: per key, its newest record with a value; ``gone``: per key whose newest record is
    a tombstone, that tombstone (its key may also be in ``live``); ``each``: the records without
    a key or with one of the keys kept one by one, in offset order."""

    live: dict[bytes, StreamRecord]
    gone: dict[bytes, StreamRecord]
    each: list[StreamRecord]


@dataclass(frozen=True, slots=True)
class PartitionBounds:
    """``log_start``: first offset still stored; ``end``: next offset to be written (committed)."""

    log_start: int
    end: int


class StreamReader(Protocol):
    """Reads committed records from assigned partitions, from given positions onwards.

    ``group`` is the consumer group whose positions a transactional commit records.
    """

    group: str | None

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        """Return up to ``max_records`` records (possibly none after ``timeout_s``)."""
        ...

    def position(self, topic: str, partition: int) -> int:
        """The next offset the reader will return for the partition (past offsets without
        records, such as transaction markers)."""
        ...

    def close(self) -> None: ...


Rebalance = Callable[[list[TopicPartition]], None]
"""Called with the input partitions a group member gains or loses."""


class GroupReader(StreamReader, Protocol):
    """A reader whose partitions a consumer group assigns: ``on_assigned`` runs (inside
    ``poll``) before records of new partitions are read and returns each one's start position;
    ``on_revoked`` runs before partitions go to another member."""

    def assignment(self) -> list[TopicPartition]:
        """The input partitions this member owns now."""
        ...

    def seek(self, positions: Mapping[TopicPartition, int]) -> None:
        """Read owned partitions again from ``positions`` (after a transaction was lost)."""
        ...

    def rebalance_pending(self) -> bool:
        """Whether the group moved to a new generation this reader has not served yet (a
        commit now would be fenced; a ``poll`` serves it)."""
        ...


class TransactionalWriter(Protocol):
    """Writes records to many partitions and commits them with consumer positions, atomically."""

    def begin(self) -> None: ...

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
        timestamp_ms: int | None = None,
    ) -> None:
        """Queue a record; ``partition`` None partitions by Kafka's murmur2 of the key (a record
        without key or partition goes to a partition of the backend's choosing)."""
        ...

    def commit(
        self,
        consumed: Mapping[TopicPartition, int] | None = None,
        reader: StreamReader | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit the transaction with the consumed positions of ``reader``'s group.

        Returns, for every partition written in the transaction, the position after its last
        record (the checkpoint a state store keeps for that changelog partition).
        """
        ...

    def abort(self) -> None: ...

    def close(self) -> None: ...


class EventStream(Protocol):
    """A partitioned, offset-addressable, durable log of records: Kafka or the local log."""

    url: str

    def ensure_topic(self, topic: str, partitions: int = 1, *, compacted: bool = False) -> None:
        """Create the topic if it does not exist (idempotent)."""
        ...

    def topics(self) -> list[str]: ...

    def partition_count(self, topic: str) -> int: ...

    def is_compacted(self, topic: str) -> bool:
        """Whether the topic's cleanup policy includes compaction."""
        ...

    def bounds(self, topic: str, partition: int) -> PartitionBounds: ...

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """First offset whose timestamp is >= ``timestamp_ms``; ``bounds().end`` if none."""
        ...

    def reader(
        self, positions: Mapping[TopicPartition, int], *, group: str | None = None
    ) -> StreamReader:
        """A reader of committed records starting at ``positions`` (next offset to read)."""
        ...

    def group_reader(
        self,
        topics: Sequence[str],
        group: str,
        member: str,
        on_assigned: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]],
        on_revoked: Rebalance,
        *,
        session_timeout_s: float = 10.0,
    ) -> GroupReader:
        """A member ``member`` (stable across restarts) of consumer group ``group`` reading
        ``topics``; same-numbered partitions of the topics always go to the same member. A
        member silent for ``session_timeout_s`` loses its partitions to the others."""
        ...

    def read(
        self, topic: str, partition: int, start: int, stop: int | None = None
    ) -> Iterator[StreamRecord]:
        """Committed records with ``start <= offset < stop``; ``stop`` None or beyond the
        committed end reads to the committed end."""
        ...

    def read_compacted(
        self,
        topic: str,
        partition: int,
        start: int,
        stop: int | None = None,
        *,
        each_keys: frozenset[bytes] = frozenset(),
        max_held_bytes: int | None = None,
    ) -> CompactedRange:
        """The records of ``read(topic, partition, start, stop)`` a compaction keeps: per key
        the newest and the newest with a value; records keyed by one of ``each_keys`` (or by
        none) all. :class:`CompactionOverBudget` once the live values held pass
        ``max_held_bytes`` (checked after as many records as keys held)."""
        ...

    def committed_positions(self, group: str, topic: str) -> dict[int, int]:
        """The positions ``group`` committed for ``topic``'s partitions (absent: none)."""
        ...

    def task_owners(self, group: str, topic: str) -> dict[int, str]:
        """The member (by name) of consumer group ``group`` that has each partition of ``topic``
        now; partitions no member has (a rebalance under way) are absent. A snapshot: by the
        time it is used, a rebalance may have moved a partition."""
        ...

    def writer(
        self,
        transactional_id: str,
        *,
        transaction_timeout_s: float | None = None,
        shared_topics: Collection[str] = (),
        owned_topics: Collection[str] = (),
    ) -> TransactionalWriter:
        """A transactional writer; a new writer with the same id fences the old one.
        ``transaction_timeout_s``: how long a transaction its writer left open (a killed
        process) may hold readers back before the broker aborts it (Kafka; default 60 s).
        A commit returns once read-committed readers see it, except in ``shared_topics``:
        topics other writers write at the same time, where another writer's open transaction
        (a killed one's, until it times out) would hold the commit back. ``owned_topics``:
        topics no other writer writes (a single processor's changelog); a commit may return
        a position for every partition of one written by key, not only those written."""
        ...

    def close(self) -> None: ...
