"""The event stream on Apache Kafka (``kafka://host:port[,host:port][?client.option=value]``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

from cdc.errors import UnavailableError, UsageError, UserError
from cdc.streams import kafka_client as kc
from cdc.streams.kafka_writer import KafkaTransactionalWriter
from cdc.streams.protocol import PartitionBounds, Rebalance, StreamRecord, TopicPartition

if TYPE_CHECKING:
    from cdc.streams.kafka_group import KafkaGroupReader

_METADATA_TIMEOUT_S = 30.0


class KafkaStreamError(UserError, RuntimeError):
    """A Kafka operation failed; the message names the topic and partition involved."""


class KafkaUnavailableError(KafkaStreamError, UnavailableError):
    """The cluster did not answer in time (down, restarting or unreachable)."""


_UNAVAILABLE_CODES = (
    kc.KafkaError._ALL_BROKERS_DOWN,
    kc.KafkaError._TRANSPORT,
    kc.KafkaError._TIMED_OUT,
    kc.KafkaError._RESOLVE,
)


def _unavailable(err: kc.KafkaError) -> bool:
    """Whether ``err`` says the cluster did not answer (a retriable error, or one of
    ``_UNAVAILABLE_CODES``) rather than refused."""
    return bool(err.retriable()) or err.code() in _UNAVAILABLE_CODES


def _failed(what: str, exc: kc.KafkaException) -> KafkaStreamError:
    """``exc`` of ``what`` as our error: :class:`KafkaUnavailableError` when ``_unavailable``."""
    err = exc.args[0] if exc.args else None
    if not isinstance(err, kc.KafkaError):
        return KafkaStreamError(f"{what}: {exc}")
    if _unavailable(err):
        return KafkaUnavailableError(f"{what}: {err.str()} (is the broker running and reachable?)")
    return KafkaStreamError(f"{what}: {err.str()}")


def _headers(raw: object) -> tuple[tuple[str, bytes], ...]:
    if not raw:
        return ()
    items = raw.items() if isinstance(raw, dict) else raw
    out = []
    for name, value in items:  # type: ignore[attr-defined]
        data = value.encode() if isinstance(value, str) else (value or b"")
        out.append((str(name), bytes(data)))
    return tuple(out)


class KafkaStreamReader:
    """Read-committed reader over assigned partitions (a librdkafka consumer)."""

    def __init__(
        self, stream: KafkaEventStream, positions: Mapping[TopicPartition, int], group: str | None
    ) -> None:
        self.group = group
        self.consumer = kc.make_consumer(stream.bootstrap, group, stream.client_config)
        self.consumer.assign([kc.KafkaPartition(t, p, o) for (t, p), o in positions.items()])
        self.at_end: set[TopicPartition] = set()

    def poll(self, max_records: int = 10_000, timeout_s: float = 1.0) -> list[StreamRecord]:
        """Up to ``max_records`` committed records, waiting up to ``timeout_s`` for the first;
        partitions found at their end are in ``at_end``. Returns early, possibly empty, when a
        partition reports its end (nothing more is committed there yet)."""
        deadline = time.monotonic() + timeout_s
        out: list[StreamRecord] = []
        while not out:
            # consume() would wait for all max_records: wait for one message, then take what
            # is already fetched.
            first = self.consumer.poll(max(0.0, deadline - time.monotonic()))
            if first is None:
                return out
            rest = self.consumer.consume(max_records - 1, 0) if max_records > 1 else []
            out, reached_end = self._records([first, *rest])
            if reached_end or time.monotonic() >= deadline:
                break  # a partition reached its end: no record may come before the timeout
        return out

    def _records(self, messages: list[kc.Message]) -> tuple[list[StreamRecord], bool]:
        """The records among ``messages``, and whether any partition reported its end."""
        # One loop, not a call per message: restores spend much of their time here.
        out: list[StreamRecord] = []
        ends: dict[TopicPartition, int] = {}  # partition at its end -> records before that
        append, new = out.append, tuple.__new__
        for msg in messages:
            err = msg.error()
            if err is not None:
                ends[self._end_of(msg, err)] = len(out)
                continue
            raw_headers = msg.headers()
            append(new(StreamRecord, (
                msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                msg.timestamp()[1], _headers(raw_headers) if raw_headers else (),
            )))  # fmt: skip
        if self.at_end and out:
            self.at_end.difference_update({TopicPartition(r.topic, r.partition) for r in out})
        for tp, before in ends.items():
            if not any((r.topic, r.partition) == tp for r in out[before:]):
                self.at_end.add(tp)
        return out, bool(ends)

    def _end_of(self, msg: kc.Message, err: kc.KafkaError) -> TopicPartition:
        """The partition a partition-EOF message is about; any other error is raised."""
        topic, partition = msg.topic() or "", msg.partition() or 0
        if err.code() != kc.KafkaError._PARTITION_EOF:
            where = f"{topic} partition {partition}" if topic else f"as consumer group {self.group}"
            if _unavailable(err):
                raise KafkaUnavailableError(f"reading {where}: {err.str()}")
            raise KafkaStreamError(f"reading {where}: {err.str()}")
        return TopicPartition(topic, partition)

    def position(self, topic: str, partition: int) -> int:
        """The consumer's next offset for the partition (past skipped transaction markers)."""
        (tp,) = self.consumer.position([kc.KafkaPartition(topic, partition)])
        return int(tp.offset)

    def close(self) -> None:
        self.consumer.close()


class KafkaEventStream:
    """:class:`~cdc.streams.protocol.EventStream` on a Kafka cluster."""

    def __init__(self, bootstrap: str, client_config: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.client_config = dict(client_config or {})
        query = f"?{urlencode(self.client_config)}" if self.client_config else ""
        self.url = f"kafka://{bootstrap}{query}"  # reopens it; printable_url for messages
        self._admin = kc.make_admin(bootstrap, self.client_config)
        self._meta = kc.make_consumer(bootstrap, None, self.client_config)

    @classmethod
    def from_url(cls, url: str) -> KafkaEventStream:
        parts = urlsplit(url)
        if not parts.netloc:
            raise UsageError(f"Kafka URL {url!r} names no broker: expected kafka://host:port[,...]")
        return cls(parts.netloc, dict(parse_qsl(parts.query)))

    def ensure_topic(self, topic: str, partitions: int = 1, *, compacted: bool = False) -> None:
        config = {"cleanup.policy": "compact"} if compacted else {}
        new = kc.NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config)
        for future in self._admin.create_topics([new]).values():
            try:
                future.result()
            except kc.KafkaException as exc:
                if exc.args[0].code() != kc.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaStreamError(f"creating topic {topic}: {exc.args[0].str()}") from exc
        deadline = time.monotonic() + _METADATA_TIMEOUT_S
        while (found := self._partitions_or_none(topic)) is None:
            if time.monotonic() > deadline:
                raise KafkaStreamError(f"topic {topic} did not appear in the cluster metadata")
            time.sleep(0.1)
        if found != partitions:
            raise KafkaStreamError(
                f"topic {topic} exists with {found} partitions, {partitions} were asked for"
            )

    def _partitions_or_none(self, topic: str) -> int | None:
        try:
            listed = self._admin.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
        except kc.KafkaException as exc:
            raise _failed(f"describing topic {topic} on {self.bootstrap}", exc) from exc
        meta = listed.topics.get(topic)
        if meta is not None and meta.error is not None and _unavailable(meta.error):
            raise KafkaUnavailableError(f"describing topic {topic}: {meta.error.str()}")
        if meta is None or meta.error is not None:
            return None
        return len(meta.partitions)

    def topics(self) -> list[str]:
        try:
            names = self._admin.list_topics(timeout=_METADATA_TIMEOUT_S).topics
        except kc.KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot list the topics of kafka://{self.bootstrap} within {_METADATA_TIMEOUT_S}s "
                f"({exc.args[0].str()}): is the broker running and reachable?"
            ) from exc
        return sorted(t for t in names if not t.startswith("__"))

    def partition_count(self, topic: str) -> int:
        found = self._partitions_or_none(topic)
        if found is None:
            raise KafkaStreamError(f"topic {topic} does not exist on {self.bootstrap}")
        return found

    def is_compacted(self, topic: str) -> bool:
        resource = kc.ConfigResource("TOPIC", topic)
        (future,) = self._admin.describe_configs([resource]).values()
        try:
            entries = future.result(timeout=_METADATA_TIMEOUT_S)
        except kc.KafkaException as exc:
            raise KafkaStreamError(f"describing topic {topic}: {exc.args[0].str()}") from exc
        return "compact" in str(entries["cleanup.policy"].value)

    def bounds(self, topic: str, partition: int) -> PartitionBounds:
        try:
            return PartitionBounds(*kc.watermarks(self._meta, topic, partition))
        except kc.KafkaException as exc:
            raise _failed(f"offsets of {topic} partition {partition}", exc) from exc

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        try:
            (found,) = self._meta.offsets_for_times(
                [kc.KafkaPartition(topic, partition, timestamp_ms)], timeout=_METADATA_TIMEOUT_S
            )
        except kc.KafkaException as exc:
            where = f"{topic} partition {partition}"
            raise _failed(f"the offset at {timestamp_ms} ms in {where}", exc) from exc
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
        committed_end = self.bounds(topic, partition).end
        end = committed_end if stop is None else min(stop, committed_end)
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

    def committed_positions(self, group: str, topic: str) -> dict[int, int]:
        consumer = kc.make_consumer(self.bootstrap, group, self.client_config)
        try:
            parts = [kc.KafkaPartition(topic, p) for p in range(self.partition_count(topic))]
            found = consumer.committed(parts, timeout=_METADATA_TIMEOUT_S)
            return {tp.partition: int(tp.offset) for tp in found if tp.offset >= 0}
        finally:
            consumer.close()

    def task_owners(self, group: str, topic: str) -> dict[int, str]:
        try:
            assigned = kc.group_assignment(self._admin, group, _METADATA_TIMEOUT_S)
        except kc.KafkaException as exc:
            raise KafkaStreamError(f"describing consumer group {group}: {exc}") from exc
        return {partition: member for member, t, partition in assigned if t == topic}

    def writer(
        self, transactional_id: str, *, transaction_timeout_s: float | None = None
    ) -> KafkaTransactionalWriter:
        return KafkaTransactionalWriter(
            self.bootstrap, transactional_id, self.client_config,
            transaction_timeout_s=transaction_timeout_s,
        )  # fmt: skip

    def close(self) -> None:
        self._meta.close()
