"""Kafka transactions: records to many partitions plus consumed positions, atomically.

Compiled with mypyc (``cdc.compiled``): its errors live in ``kafka_errors``, as a compiled
module cannot define subclasses of the interpreted exception classes they extend.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from cdc.streams import kafka_client as kc
from cdc.streams.kafka_ends import PartitionEnds
from cdc.streams.kafka_errors import (
    KafkaCommitUnknownError,
    KafkaTransactionError,
    KafkaTransactionUnavailableError,
    unavailable,
)
from cdc.streams.protocol import StreamReader, TopicPartition

COMMIT_RETRY_S = 0.1
"""The pause before asking again for a commit that failed retriably."""
_REPLACEABLE = (kc.KafkaError.INVALID_TXN_STATE, kc.KafkaError._STATE, kc.KafkaError._CONFLICT)
"""Errors of an abort the producer's own state refused (INVALID_TXN_STATE: librdkafka#4849)."""


class KafkaTransactionalWriter:
    """A transactional, idempotent producer. A newer writer with the same id fences this one.

    Kafka writes a transaction's commit markers after ``commit_transaction`` returns, so
    read-committed readers may not see it at once; with ``visible_on_commit`` (the default)
    ``commit`` returns only once every written partition's last stable offset covers it, but
    for partitions of ``shared_topics``: other writers' open transactions hold their last
    stable offset back (a killed writer's until the broker aborts it). So the wait lasts up to
    the transaction timeout (the same for the writers of one processor) and 10 s more.

    ``owned_topics`` (topic -> partitions) are written by this writer alone: their records go
    without a delivery report each (a Python call per record, and a copy of its value), and
    ``commit`` takes their positions from the partitions' ends once they are flushed; a failed
    record fails the commit all the same (librdkafka counts them per transaction).
    """

    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        extra: kc.Config,
        *,
        visible_on_commit: bool = True,
        transaction_timeout_s: float | None = None,
        shared_topics: Collection[str] = (),
        owned_topics: Mapping[str, int] | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self._shared = frozenset(shared_topics)
        self._owned = dict(owned_topics or {})
        self._owned_written: set[tuple[str, int | None]] = set()
        """Owned partitions written (``None``: some partition of the topic, by key)."""
        self._bootstrap, self._extra = bootstrap, extra
        self._timeout = {} if transaction_timeout_s is None else {
            "transaction.timeout.ms": int(transaction_timeout_s * 1000)
        }  # fmt: skip
        self._producer = self._new_producer()
        self._visible_on_commit = visible_on_commit
        needed = visible_on_commit or bool(self._owned)
        self._ends = PartitionEnds(bootstrap, extra) if needed else None
        self._producer.init_transactions(60)
        self._written: dict[tuple[str, int], int] = {}
        self._failure: str | None = None
        self._generation = 0
        self._open = False
        """Whether the producer has a transaction open (one whose commit failed, maybe)."""
        self._visible_within_s = max(30.0, (transaction_timeout_s or 60.0) + 10.0)

    def begin(self) -> None:
        if self._open:  # a commit failed with an error librdkafka did not ask to abort for
            self._settle()
        self._written = {}
        self._owned_written = set()
        self._failure = None
        self._generation += 1
        self._callback = self._on_delivery(self._written)
        self._producer.begin_transaction()
        self._open = True

    def _settle(self) -> None:
        """Abort the transaction a failed commit left open. A producer whose state refuses the
        abort is replaced; one fenced, or with the cluster away, is not: a new producer would
        fence the writer that fenced it (or that took over while the cluster was away)."""
        try:
            self._producer.abort_transaction(60)
            self._open = False
        except kc.KafkaException as exc:
            err = kc.kafka_error(exc)
            if err is None or err.code() not in _REPLACEABLE:
                raise self._lost(exc) from exc
            self._take_over()

    def _new_producer(self) -> kc.Producer:
        return kc.make_producer(
            self._bootstrap, self.transactional_id, {**self._timeout, **self._extra}
        )

    def _on_delivery(self, written: dict[tuple[str, int], int]) -> Any:
        generation = self._generation

        def delivered(err: Any, msg: Any) -> None:
            # Reports of an aborted transaction's purged records may arrive during the next one.
            if generation != self._generation:
                return
            if err is not None:
                self._failure = f"{msg.topic()} partition {msg.partition()}: {err.str()}"
                return
            # Once per record: a plain tuple, made a TopicPartition once, in ``commit``.
            where, nxt = (msg.topic(), msg.partition()), msg.offset() + 1
            if nxt > written.get(where, -1):
                written[where] = nxt

        return delivered

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
        owned = topic in self._owned
        if owned:
            self._owned_written.add((topic, partition))
        if partition is None and not headers and timestamp_ms is None:
            try:  # the common record, without building keyword arguments
                if owned:
                    self._producer.produce(topic, value, key)
                else:
                    self._producer.produce(topic, value, key, on_delivery=self._callback)
                return
            except BufferError:
                pass
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if not owned:
            kwargs["on_delivery"] = self._callback
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
                pinned = getattr(reader, "group_metadata", None)
                metadata = pinned() if pinned else consumer.consumer_group_metadata()
                self._producer.send_offsets_to_transaction(offsets, metadata, 60)
            self._producer.flush(60)
            if self._failure:
                raise KafkaTransactionError(f"a record was not delivered: {self._failure}")
            if self._owned_written:
                self._written.update(self._owned_ends())
        except kc.KafkaException as exc:
            raise self._lost(exc) from exc
        except SystemError as exc:  # confluent-kafka's flush meeting a fatal error (fenced)
            if isinstance(exc.__cause__, kc.KafkaException):
                raise self._lost(exc.__cause__) from exc.__cause__
            text = f"transaction of {self.transactional_id} failed: {exc}"
            raise KafkaTransactionError(text) from exc  # left open: the next begin aborts it
        except KafkaTransactionError:
            self._abort_quietly()
            raise
        self._commit_transaction()
        self._open = False
        self._wait_visible()
        return {TopicPartition(*where): position for where, position in self._written.items()}

    def _owned_ends(self) -> dict[tuple[str, int], int]:
        """The flushed ends of the owned partitions written: the positions after this
        transaction's records there, as nothing else writes them."""
        partitions = {
            (topic, p)
            for topic, partition in self._owned_written
            for p in (range(self._owned[topic]) if partition is None else (partition,))
        }
        assert self._ends is not None
        return self._ends.read(partitions, time.monotonic() + 60.0, committed=False)

    def _lost(self, exc: kc.KafkaException) -> KafkaTransactionError:
        """``exc`` of a transaction not committed (aborted first where librdkafka asks to)."""
        if kc.is_retriable_abort(exc):
            self._abort_quietly()
        err = kc.kafka_error(exc)
        if err is None:
            return KafkaTransactionError(f"transaction of {self.transactional_id} failed: {exc}")
        text = f"transaction of {self.transactional_id} failed: {err.str()}"
        if unavailable(err):
            return KafkaTransactionUnavailableError(f"{text} (is the broker running?)")
        return KafkaTransactionError(text)

    def _commit_transaction(self, timeout_s: float = 60.0) -> None:
        """``commit_transaction``, asked again while its failure is retriable: a commit that
        timed out goes on in the background, and asking again is how its outcome is learnt."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                return
            except kc.KafkaException as exc:
                err = kc.kafka_error(exc)
                if kc.is_retriable_abort(exc) or err is None or err.fatal() or not unavailable(err):
                    raise self._lost(exc) from exc  # aborted, or fenced: not committed
                # The cluster did not answer: asked again while librdkafka allows it.
                if not err.retriable() or time.monotonic() + COMMIT_RETRY_S >= deadline:
                    raise KafkaCommitUnknownError(
                        f"transaction of {self.transactional_id}: its commit did not complete "
                        f"within {timeout_s:.0f} s ({err.str()}), and may have taken effect "
                        "(is the broker running and reachable?)"
                    ) from exc
                time.sleep(COMMIT_RETRY_S)  # an error answered at once would spin otherwise

    def _wait_visible(self) -> None:
        if self._visible_on_commit and self._ends is not None:
            waiting = {w: p for w, p in self._written.items() if w[0] not in self._shared}
            self._ends.wait_visible(waiting, self._visible_within_s, self.transactional_id)

    def _abort_quietly(self) -> None:
        # The commit already failed; an abort that fails too (e.g. the producer was fenced)
        # changes nothing for the caller, whose transaction is not visible either way. After a
        # failed transaction librdkafka may purge records of the next one, so a fresh producer
        # (same transactional id, new epoch) carries on.
        try:
            self._producer.abort_transaction(60)
            self._open = False
        except kc.KafkaException as exc:
            err = kc.kafka_error(exc)
            if err is not None and err.fatal() and err.code() not in _REPLACEABLE:
                return  # fenced: a new producer would fence the writer that fenced this one
        with contextlib.suppress(kc.KafkaException):
            self._take_over()

    def abort(self) -> None:
        self._written = {}
        self._owned_written = set()
        try:
            self._producer.abort_transaction(60)
            self._open = False
        except kc.KafkaException as exc:
            failed = f"transaction of {self.transactional_id} could not be aborted: "
            failed += exc.args[0].str()
            if exc.args[0].code() != kc.KafkaError.INVALID_TXN_STATE:
                # Fenced, say: a fresh producer would fence the writer that fenced this one.
                raise KafkaTransactionError(failed) from exc
            # librdkafka's abort can fail fatally with INVALID_TXN_STATE soon after records
            # were sent (confluentinc/librdkafka#4849), leaving the producer unusable. A fresh
            # producer with the same id takes over: its init_transactions aborts the open
            # transaction on the broker.
            try:
                self._take_over()
            except kc.KafkaException as again:
                raise KafkaTransactionError(
                    f"{failed}; a new producer failed too: {again.args[0].str()}"
                ) from again

    def _take_over(self) -> None:
        """A new producer with this writer's transactional id (the old one is dropped)."""
        self._generation += 1  # reports of the dropped producer's records are stale
        self._open = True  # until the new producer is initialised: the next begin retries
        self._producer = self._new_producer()
        self._producer.init_transactions(60)
        self._open = False

    def close(self) -> None:
        self._producer.flush(10)
        self._ends = None
