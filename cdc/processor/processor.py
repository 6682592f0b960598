"""The event processor: input events -> user function over state tables -> changelog, exactly once.

Each commit is one stream transaction holding the BEGIN event, the changelog records of every
state write since the last commit, dead-letter records, the END event, and the input positions
of the processor's consumer group. Only after that transaction commits is the local store
updated (with the changelog positions as its checkpoint), so the store never runs ahead of the
changelog, and a crash at any point is repaired on start by restoring the changelog tail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cdc.connector import ChangelogConnector, InputOrigin, OutRecord
from cdc.connector.changelog import TransactionCounter
from cdc.connector.metadata import begin_record, end_record, last_commit_seq
from cdc.processor.events import Decoder, InputEvent, RejectEvent, dead_letter, json_decoder
from cdc.processor.restore import Progress, RestoreReport, restore_store
from cdc.state import (
    CorruptStateStoreError,
    StateTable,
    StateTables,
    StateTransaction,
    destroy_state_store,
    open_state_store,
)
from cdc.streams.protocol import (
    EventStream,
    StreamReader,
    StreamRecord,
    TopicPartition,
    TransactionalWriter,
)

Handler = Callable[[InputEvent, StateTransaction], None]


@dataclass(frozen=True)
class ProcessorConfig:
    """``processor_id`` names the consumer group, the changelog topics
    (``<id>.<table>``), the transaction topic and the transactional id."""

    processor_id: str
    inputs: tuple[str, ...]
    store_url: str = "memory://"
    changelog_partitions: int = 0
    """0: as many as the input topic with the most partitions."""
    commit_max_events: int = 5_000
    commit_interval_s: float = 0.2
    schemas_enable: bool = True
    dead_letter_errors: bool = True
    """Dead-letter events whose decoding or handling raises; False: only ``RejectEvent``."""
    session_timeout_s: float = 10.0
    """Partitioned processors: a member silent this long loses its tasks to the others."""
    transaction_timeout_s: float = 10.0
    """Partitioned processors: how long a transaction a killed member left open holds its
    partitions back before the broker aborts it (part of a failover's time)."""

    @property
    def dead_letter_topic(self) -> str:
        return f"{self.processor_id}.dead-letter"


@dataclass
class RunReport:
    events: int = 0
    dead_lettered: int = 0
    commits: int = 0
    seconds: float = 0.0
    positions: dict[TopicPartition, int] = field(default_factory=dict)


class EventProcessor:
    """Runs ``handler`` over the input topics with exactly-once state and changelog."""

    def __init__(
        self,
        config: ProcessorConfig,
        stream: EventStream,
        tables: Sequence[StateTable],
        handler: Handler,
        *,
        decoder: Decoder = json_decoder,
    ) -> None:
        self.config, self.stream, self.handler, self.decoder = config, stream, handler, decoder
        self._declared = list(tables)
        partitions = config.changelog_partitions or max(
            stream.partition_count(t) for t in config.inputs
        )
        self.connector = ChangelogConnector(
            config.processor_id, tables, partitions=partitions, schemas_enable=config.schemas_enable
        )
        self._reader: StreamReader | None = None
        self._writer: TransactionalWriter | None = None
        self._txn: TransactionCounter | None = None
        self._pending_events = 0
        self._consumed: dict[TopicPartition, int] = {}
        self._next_offsets: dict[tuple[str, int], int] = {}
        """Input positions reached since the last commit (plain tuples: set per event)."""
        self._checkpoint: dict[TopicPartition, int] = {}
        self._seq = 0
        self._txn_prefix = config.processor_id
        """Transaction ids are ``<prefix>:<commit seq>``."""
        self.tables: StateTables | None = None

    def start(self, progress: Progress | None = None) -> RestoreReport:
        """Create topics, restore the local store from the changelog, and open the input."""
        cfg, stream = self.config, self.stream
        for topic in self.connector.topics.values():
            stream.ensure_topic(topic, self.connector.partitions, compacted=True)
        stream.ensure_topic(self.connector.transaction_topic, 1)
        stream.ensure_topic(cfg.dead_letter_topic, 1)
        # Fence any zombie of this processor before reading the changelog end.
        # The only writer of the changelog once it has fenced its zombies: no report per record.
        self._writer = stream.writer(
            f"{cfg.processor_id}.processor", owned_topics=tuple(self.connector.topics.values())
        )
        try:
            store = open_state_store(cfg.store_url)
            reason = ""
        except CorruptStateStoreError as exc:
            destroy_state_store(cfg.store_url)
            store, reason = open_state_store(cfg.store_url), f"store unusable: {exc}"
        report = restore_store(
            stream, store, self.connector, rebuilt=bool(reason), reason=reason, progress=progress
        )
        self._checkpoint = dict(report.positions)
        self.tables = StateTables(store, self._declared)
        self._seq = self._last_seq()
        positions = {}
        for topic in cfg.inputs:
            committed = stream.committed_positions(cfg.processor_id, topic)
            for partition in range(stream.partition_count(topic)):
                log_start = stream.bounds(topic, partition).log_start
                positions[TopicPartition(topic, partition)] = committed.get(partition, log_start)
        self._consumed = dict(positions)
        self._reader = stream.reader(positions, group=cfg.processor_id)
        return report

    def _last_seq(self) -> int:
        topic = self.connector.transaction_topic
        bounds = self.stream.bounds(topic, 0)
        tail = self.stream.read(topic, 0, max(bounds.log_start, bounds.end - 16))
        return last_commit_seq([r.value for r in tail])

    def run(
        self,
        *,
        max_events: int | None = None,
        idle_timeout_s: float | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> RunReport:
        """Process until ``max_events``, ``idle_timeout_s`` without input, or ``should_stop()``."""
        assert self._reader is not None, "start() first"
        report, started = RunReport(), time.monotonic()
        last_input, last_commit = started, started
        while True:
            want = self.config.commit_max_events - self._pending_events
            if max_events is not None:
                want = min(want, max_events - report.events)
            records = self._poll(max(1, want)) if want else []
            for record in records:
                report.dead_lettered += self._process(record)
                report.events += 1
            now = time.monotonic()
            if records or self._reassigned():
                last_input = now
            due = now - last_commit >= self.config.commit_interval_s
            full = self._pending_events >= self.config.commit_max_events
            done = max_events is not None and report.events >= max_events
            if self._txn is not None and (due or full or done or not records):
                self._commit()
                report.commits += 1
                last_commit = time.monotonic()
            if done or (should_stop is not None and should_stop()):
                break
            if idle_timeout_s is not None and now - last_input >= idle_timeout_s:
                break
        if self._txn is not None:
            self._commit()
            report.commits += 1
        report.seconds = time.monotonic() - started
        report.positions = dict(self._consumed)
        return report

    def _poll(self, want: int) -> list[StreamRecord]:
        assert self._reader is not None
        return self._reader.poll(want, self.config.commit_interval_s)

    def _reassigned(self) -> bool:
        """Whether the input partitions changed in the last poll (the idle time restarts)."""
        return False

    def _begin(self) -> TransactionCounter:
        assert self._writer is not None
        self._seq = self._next_seq()
        txn = TransactionCounter(self._txn_prefix, self._seq)
        self._writer.begin()
        self._send(begin_record(self.connector, txn))
        self._txn = txn
        return txn

    def _next_seq(self) -> int:
        return self._seq + 1

    def _send(self, out: OutRecord) -> None:
        assert self._writer is not None
        if out.partition is None and not out.headers:
            self._writer.send(out.topic, out.key, out.value)
        else:
            self._writer.send(out.topic, out.key, out.value, partition=out.partition,
                              headers=out.headers)  # fmt: skip

    def _process(self, record: StreamRecord) -> int:
        """Run the handler on one record; 1 if it was dead-lettered."""
        assert self.tables is not None
        return self._handle(record, self.tables, None)

    def _handle(self, record: StreamRecord, tables: StateTables, partition: int | None) -> int:
        """Run the handler on ``record`` over ``tables``, its changelog records going to
        ``partition`` (None: partitioned by key); 1 if the record was dead-lettered."""
        txn = self._txn or self._begin()
        offset = record.offset
        self._next_offsets[record.topic, record.partition] = offset + 1
        self._pending_events += 1
        origin = InputOrigin(record.topic, record.partition, offset, offset + 1)
        tx = tables.begin()
        try:
            event = self.decoder(record)
            self.handler(event, tx)
            truncated = tx.truncated
            cleared = (
                {name: list(tables.view(name).scan()) for name in truncated} if truncated else None
            )
            if partition is None:
                out = self.connector.encode(tx.preview(), origin, txn, cleared)
            else:
                out = self.connector.encode(tx.preview(), origin, txn, cleared, partition=partition)
        except Exception as exc:  # the event, not the processor, is at fault: dead-letter it
            tx.abort()
            if not self.config.dead_letter_errors and not isinstance(exc, RejectEvent):
                raise
            reason = f"{type(exc).__name__}: {exc}"
            self._send(dead_letter(self.config.dead_letter_topic, record, reason))
            return 1
        except BaseException:
            tx.abort()
            raise
        tx.commit()
        send = self._send
        for item in out:
            send(item)
        return 0

    def emit_snapshot(self, *tables: str) -> int:
        """Write every committed row of ``tables`` (default: all) to the changelog as a read
        (``r``) event, in one transaction of its own, like a Debezium snapshot; returns the
        number of rows. Readers rebuilding from this point on need nothing older."""
        assert self._writer is not None, "start() first"
        if self._txn is not None:
            self._commit()
        txn = self._begin()
        rows = 0
        for partition, state in self._snapshot_sources():
            origin = InputOrigin("snapshot", partition or 0, 0, 0)
            for change in state.snapshot(*tables):
                for item in self.connector.encode(
                    [change], origin, txn, snapshot=True, partition=partition
                ):
                    self._send(item)
                rows += 1
        self._commit()
        return rows

    def _snapshot_sources(self) -> list[tuple[int | None, StateTables]]:
        """(changelog partition, state tables) to snapshot: None partitions by key."""
        assert self.tables is not None, "start() first"
        return [(None, self.tables)]

    def _commit(self) -> None:
        assert self._writer is not None and self._txn is not None and self.tables is not None
        self._send(end_record(self.connector, self._txn))
        self._consumed.update({TopicPartition(*tp): o for tp, o in self._next_offsets.items()})
        self._next_offsets.clear()
        written = self._writer.commit(self._consumed, self._reader)
        changelog = set(self.connector.topics.values())
        self._checkpoint.update({tp: p for tp, p in written.items() if tp.topic in changelog})
        self.tables.apply(dict(self._checkpoint))
        self._txn, self._pending_events = None, 0

    def close(self) -> None:
        """Close the input and the writer (an open transaction is aborted by the stream)."""
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            self._writer.close()
        if self.tables is not None:
            self.tables.store.close()
