"""Kafka transactions: records to many partitions plus consumed positions, atomically."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from cdc.streams import kafka_client as kc
from cdc.streams.protocol import StreamReader, TopicPartition


class KafkaTransactionError(RuntimeError):
    """A transaction could not be committed; nothing of it is visible to read-committed readers."""


class KafkaTransactionalWriter:
    """A transactional, idempotent producer. A newer writer with the same id fences this one."""

    def __init__(self, bootstrap: str, transactional_id: str, extra: Mapping[str, str]) -> None:
        self.transactional_id = transactional_id
        self._producer = kc.make_producer(bootstrap, transactional_id, extra)
        self._producer.init_transactions(60)
        self._written: dict[TopicPartition, int] = {}
        self._failure: str | None = None

    def begin(self) -> None:
        self._written = {}
        self._failure = None
        self._producer.begin_transaction()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failure = f"{msg.topic()} partition {msg.partition()}: {err.str()}"
            return
        tp = TopicPartition(msg.topic(), msg.partition())
        nxt = msg.offset() + 1
        if nxt > self._written.get(tp, -1):
            self._written[tp] = nxt

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
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": self._delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.05)  # local queue full: let deliveries drain

    def commit(
        self,
        consumed: Mapping[TopicPartition, int] | None = None,
        reader: StreamReader | None = None,
    ) -> dict[TopicPartition, int]:
        try:
            if consumed:
                consumer = getattr(reader, "consumer", None)
                if consumer is None:
                    raise ValueError("committing consumed positions needs the Kafka reader")
                offsets = [kc.KafkaPartition(t, p, o) for (t, p), o in consumed.items()]
                self._producer.send_offsets_to_transaction(
                    offsets, consumer.consumer_group_metadata(), 60
                )
            self._producer.flush(60)
            if self._failure:
                raise KafkaTransactionError(f"a record was not delivered: {self._failure}")
            self._producer.commit_transaction(60)
        except kc.KafkaException as exc:
            if kc.is_retriable_abort(exc):
                self._abort_quietly()
            raise KafkaTransactionError(
                f"transaction of {self.transactional_id} failed: {exc.args[0].str()}"
            ) from exc
        except KafkaTransactionError:
            self._abort_quietly()
            raise
        return dict(self._written)

    def _abort_quietly(self) -> None:
        # The commit already failed; an abort that fails too (e.g. the producer was fenced)
        # changes nothing for the caller, whose transaction is not visible either way.
        with contextlib.suppress(kc.KafkaException):
            self._producer.abort_transaction(60)

    def abort(self) -> None:
        self._producer.abort_transaction(60)
        self._written = {}

    def close(self) -> None:
        self._producer.flush(10)
