"""The event stream on Apache Kafka (``kafka://host:port[,host:port][?client.option=value]``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from cdc.errors import UsageError
from cdc.streams import kafka_client as kc
from cdc.streams.kafka_errors import (
    KafkaRefusedError,
    KafkaStreamError,
    KafkaUnavailableError,
    LoginWatch,
    failed,
    unavailable,
)
from cdc.streams.kafka_reader import KafkaStreamReader
from cdc.streams.kafka_writer import KafkaTransactionalWriter
from cdc.streams.latest import HeldBudget
from cdc.streams.protocol import (
    CompactedRange,
    PartitionBounds,
    Rebalance,
    StreamRecord,
    TopicPartition,
)

if TYPE_CHECKING:
    from cdc.streams.kafka_group import KafkaGroupReader

__all__ = [
    "KafkaEventStream", "KafkaRefusedError", "KafkaStreamError", "KafkaStreamReader",
    "KafkaUnavailableError",
]  # fmt: skip

_METADATA_TIMEOUT_S = 30.0
LOGIN_CHECK_S = 1.0
"""Metadata requests wait first this long, then twice as long each time, checking in between
whether a login failed (librdkafka would retry it until the whole timeout is spent); the
doubling leaves a slow cluster the long waits it needs."""
_Answer = TypeVar("_Answer")


class KafkaEventStream:
    """:class:`~cdc.streams.protocol.EventStream` on a Kafka cluster."""

    def __init__(self, bootstrap: str, client_config: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.client_config = dict(client_config or {})
        query = f"?{urlencode(self.client_config)}" if self.client_config else ""
        self.url = f"kafka://{bootstrap}{query}"  # reopens it; printable_url for messages
        self.login = LoginWatch()
        self._admin = kc.make_admin(bootstrap, self.client_settings())
        self._meta = kc.make_consumer(bootstrap, None, self.client_settings())

    def client_settings(self) -> dict[str, object]:
        """The URL's client settings plus the stream's :class:`LoginWatch` as ``error_cb``: what
        every client of this stream is built with."""
        return {**self.client_config, "error_cb": self.login}

    def _ask(self, what: str, call: Callable[[float], _Answer]) -> _Answer:
        """``call(timeout_s)``'s answer within ``_METADATA_TIMEOUT_S``, asked with waits of
        ``LOGIN_CHECK_S``, doubling: a failed login ends the wait at once, as our error."""
        deadline, wait = time.monotonic() + _METADATA_TIMEOUT_S, LOGIN_CHECK_S
        self._serve_callbacks()
        self.login.refused = None  # only what this request runs into counts
        while True:
            try:
                answer = call(min(wait, max(0.05, deadline - time.monotonic())))
            except kc.KafkaException as exc:
                self._serve_callbacks()
                err = kc.kafka_error(exc)
                dropped = err is not None and kc.is_partition_dropped(err)
                waiting = err is not None and (unavailable(err) or kc.is_settling(err) or dropped)
                if waiting and self.login.refused is None and time.monotonic() < deadline:
                    wait *= 2
                    continue
                # (callbacks served just above; a partition dropped until now: still away)
                raise failed(what, exc, self.login, away=dropped) from exc
            self._serve_callbacks()
            self.login.refused = None
            return answer

    def _serve_callbacks(self) -> None:
        """Deliver the stream's own clients' queued error callbacks and log lines (librdkafka
        queues them until the client is polled)."""
        self._admin.poll(0)
        self._meta.poll(0)

    def _failure(self, what: str, exc: kc.KafkaException) -> KafkaStreamError:
        """``exc`` of ``what`` as our error, once the callbacks that may name a refused login
        have been served."""
        self._serve_callbacks()
        return failed(what, exc, self.login)

    @classmethod
    def from_url(cls, url: str) -> KafkaEventStream:
        parts = urlsplit(url)
        if not parts.netloc:
            raise UsageError(f"Kafka URL {url!r} names no broker: expected kafka://host:port[,...]")
        return cls(parts.netloc, dict(parse_qsl(parts.query)))

    def ensure_topic(self, topic: str, partitions: int = 1, *, compacted: bool = False) -> None:
        found = self._partitions_or_none(topic)  # first: a failed login is named here
        if found is not None:
            self._check_partitions(topic, found, partitions)
            return
        config = {"cleanup.policy": "compact"} if compacted else {}
        new = kc.NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config)
        for future in self._admin.create_topics([new]).values():
            try:
                future.result()
            except kc.KafkaException as exc:
                err = kc.kafka_error(exc)
                if err is None or err.code() != kc.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise self._failure(f"creating topic {topic}", exc) from exc
        deadline = time.monotonic() + _METADATA_TIMEOUT_S
        while (found := self._partitions_or_none(topic)) is None:
            if time.monotonic() > deadline:
                raise KafkaStreamError(f"topic {topic} did not appear in the cluster metadata")
            time.sleep(0.1)
        self._check_partitions(topic, found, partitions)

    @staticmethod
    def _check_partitions(topic: str, found: int, partitions: int) -> None:
        if found != partitions:
            raise KafkaStreamError(
                f"topic {topic} exists with {found} partitions, {partitions} were asked for"
            )

    def _partitions_or_none(self, topic: str) -> int | None:
        what = f"describing topic {topic} on {self.bootstrap}"
        listed = self._ask(what, lambda timeout: self._admin.list_topics(topic, timeout=timeout))
        meta = listed.topics.get(topic)
        if meta is not None and meta.error is not None and unavailable(meta.error):
            raise KafkaUnavailableError(f"describing topic {topic}: {meta.error.str()}")
        if meta is None or meta.error is not None:
            return None
        return len(meta.partitions)

    def topics(self) -> list[str]:
        what = f"listing the topics of kafka://{self.bootstrap}"
        names = self._ask(what, lambda timeout: self._admin.list_topics(timeout=timeout)).topics
        return sorted(t for t in names if not t.startswith("__"))

    def partition_count(self, topic: str) -> int:
        found = self._partitions_or_none(topic)
        if found is None:
            raise KafkaStreamError(f"topic {topic} does not exist on {self.bootstrap}")
        return found

    def is_compacted(self, topic: str) -> bool:
        resource = kc.ConfigResource("TOPIC", topic)

        def cleanup_policy(timeout: float) -> str:
            found = self._admin.describe_configs([resource], request_timeout=timeout)
            # The request's own timeout ends the future (as _TIMED_OUT, an outage); the wait
            # here only bounds a future librdkafka never settles.
            (future,) = found.values()
            try:
                entries = future.result(timeout=timeout + _METADATA_TIMEOUT_S)
                return str(entries["cleanup.policy"].value)
            except TimeoutError as exc:
                raise kc.KafkaException(kc.KafkaError(kc.KafkaError._TIMED_OUT)) from exc

        return "compact" in self._ask(f"describing topic {topic}", cleanup_policy)

    def bounds(self, topic: str, partition: int) -> PartitionBounds:
        found = self._ask(
            f"offsets of {topic} partition {partition}",
            lambda timeout: kc.watermarks(self._meta, topic, partition, timeout_s=timeout),
        )
        return PartitionBounds(*found)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        wanted = [kc.KafkaPartition(topic, partition, timestamp_ms)]
        (found,) = self._ask(
            f"the offset at {timestamp_ms} ms in {topic} partition {partition}",
            lambda timeout: self._meta.offsets_for_times(wanted, timeout=timeout),
        )
        end = self.bounds(topic, partition).end
        if found.offset < 0:
            return end
        # The offset found may be a transaction marker (its timestamp is the commit time):
        # the answer is the first record at or after it.
        first = next(iter(self.read(topic, partition, int(found.offset))), None)
        return first.offset if first is not None else end

    def reader(
        self, positions: Mapping[TopicPartition, int], *, group: str | None = None
    ) -> KafkaStreamReader:
        return KafkaStreamReader(self, positions, group)

    def group_reader(
        self,
        topics: Sequence[str],
        group: str,
        member: str,
        on_assigned: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]],
        on_revoked: Rebalance,
        *,
        session_timeout_s: float = 10.0,
    ) -> KafkaGroupReader:
        from cdc.streams.kafka_group import KafkaGroupReader

        return KafkaGroupReader(
            self, topics, group, member, on_assigned, on_revoked, session_timeout_s
        )

    def read(
        self, topic: str, partition: int, start: int, stop: int | None = None
    ) -> Iterator[StreamRecord]:
        end = self._read_end(topic, partition, stop)
        if start >= end:
            return
        reader = self.reader({TopicPartition(topic, partition): start})
        try:
            while True:
                batch = reader.poll(10_000, 1.0)
                for record in batch:
                    if record.offset >= end:
                        return
                    yield record
                if not batch and reader.position(topic, partition) >= end:
                    return
                if batch and batch[-1].offset >= end - 1:
                    return
        finally:
            reader.close()

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
        end = self._read_end(topic, partition, stop)
        if start >= end:
            return CompactedRange({}, {}, [])
        reader = self.reader({TopicPartition(topic, partition): start})
        try:
            budget = HeldBudget(topic, partition, max_held_bytes)
            return reader.compact(topic, partition, end, each_keys, budget)
        finally:
            reader.close()

    def _read_end(self, topic: str, partition: int, stop: int | None) -> int:
        """Where a bounded read of the partition stops: ``stop``, at most the committed end."""
        committed_end = self.bounds(topic, partition).end
        return committed_end if stop is None else min(stop, committed_end)

    def committed_positions(self, group: str, topic: str) -> dict[int, int]:
        consumer = kc.make_consumer(self.bootstrap, group, self.client_settings())
        try:
            parts = [kc.KafkaPartition(topic, p) for p in range(self.partition_count(topic))]
            try:
                found = consumer.committed(parts, timeout=_METADATA_TIMEOUT_S)
            except kc.KafkaException as exc:
                consumer.poll(0)  # its own callbacks too
                raise self._failure(f"positions of group {group} on {topic}", exc) from exc
            return {tp.partition: int(tp.offset) for tp in found if tp.offset >= 0}
        finally:
            consumer.close()

    def task_owners(self, group: str, topic: str) -> dict[int, str]:
        try:
            assigned = kc.group_assignment(self._admin, group, _METADATA_TIMEOUT_S)
        except kc.KafkaException as exc:
            raise self._failure(f"describing consumer group {group}", exc) from exc
        return {partition: member for member, t, partition in assigned if t == topic}

    def writer(
        self,
        transactional_id: str,
        *,
        transaction_timeout_s: float | None = None,
        shared_topics: Collection[str] = (),
        owned_topics: Collection[str] = (),
    ) -> KafkaTransactionalWriter:
        return KafkaTransactionalWriter(
            self.bootstrap, transactional_id, self.client_settings(),
            transaction_timeout_s=transaction_timeout_s, shared_topics=shared_topics,
            owned_topics={topic: self.partition_count(topic) for topic in owned_topics},
        )  # fmt: skip

    def close(self) -> None:
        self._meta.close()
