"""Captured state-table changes to changelog records, and changelog records back to changes.

Each state table has a compacted changelog topic ``<processor>.<table>`` keyed by primary key;
values are Debezium envelopes with a ``ReplicatorSource`` block (which processor, which input
records, which transaction). A delete is followed by a tombstone so compaction can drop the key.

Clearing a table emits a ``t`` event on every partition (compacted topics need a key, so it
carries the key ``null``) followed by a ``d`` and a tombstone for every row that existed: readers
that understand ``t`` clear the table; the deletes keep compaction and key-wise readers (the
restore path among them) correct without it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NamedTuple

from cdc.connector.restore_rows import AfterImageReader
from cdc.connector.spec import table_spec
from cdc.errors import ChangeEventError
from cdc.events import ChangeEvent, Op, Tombstone
from cdc.events.reader import ChangeEventReader
from cdc.events.writer import EventWriter
from cdc.state.changes import CapturedChange, ChangeKind, Row
from cdc.state.table import StateTable
from cdc.streams.protocol import StreamRecord

try:
    PRODUCT_VERSION = version("cdc-replicator")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
    PRODUCT_VERSION = "0"

_OPS = {
    ChangeKind.CREATE: Op.CREATE,
    ChangeKind.UPDATE: Op.UPDATE,
    ChangeKind.DELETE: Op.DELETE,
    ChangeKind.READ: Op.READ,
    ChangeKind.TRUNCATE: Op.TRUNCATE,
}
_KINDS = {op: kind for kind, op in _OPS.items()}


class OutRecord(NamedTuple):
    """A record to append: ``partition`` None partitions by the key (murmur2)."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


class InputOrigin(NamedTuple):
    """The input records that produced a write: offsets ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int


class ChangelogConnector:
    """Encodes one processor's state-table changes; decodes its changelog for restore."""

    def __init__(
        self,
        processor_id: str,
        tables: Iterable[StateTable],
        *,
        partitions: int = 1,
        schemas_enable: bool = True,
    ) -> None:
        self.processor_id = processor_id
        self.partitions = partitions
        self.tables = {t.name: t for t in tables}
        specs = {name: table_spec(processor_id, t) for name, t in self.tables.items()}
        self.topics = {name: f"{processor_id}.{name}" for name in self.tables}
        self.table_of_topic = {topic: name for name, topic in self.topics.items()}
        self.transaction_topic = f"{processor_id}.transaction"
        self._writers = {n: EventWriter(s, schemas_enable=schemas_enable) for n, s in specs.items()}
        self._readers = {n: ChangeEventReader(s) for n, s in specs.items()}
        self._after_readers = {
            n: AfterImageReader(s, self._writers[n].value_head) for n, s in specs.items()
        }
        self._templates: dict[tuple[str, str, bool], dict[str, object]] = {}
        self._templates_txn: TransactionCounter | None = None
        self.truncate_key = b'{"schema":null,"payload":null}' if schemas_enable else b"null"

    def source(
        self, table: str, origin: InputOrigin, txn: TransactionCounter, ts_ms: int, snapshot: bool
    ) -> dict[str, object]:
        """The ``ReplicatorSource`` fields of the changes of one input record (all of
        ``SOURCE_NAMES``, in that order): a copy of the block of the same table, input topic and
        transaction, its time and input positions set, as building 17 fields per event cost
        more than the rest of the change event's envelope."""
        if self._templates_txn is not txn:
            self._templates, self._templates_txn = {}, txn
        where = (table, origin.topic, snapshot)
        template = self._templates.get(where)
        if template is None:
            template = self._templates[where] = {
                "version": PRODUCT_VERSION,
                "connector": "replicator",
                "name": self.processor_id,
                "ts_ms": None,
                "ts_us": None,
                "ts_ns": None,
                "snapshot": "true" if snapshot else "false",
                "db": self.processor_id,
                "sequence": None,
                "table": table,
                "processor_id": self.processor_id,
                "input_topic": origin.topic,
                "input_partition": None,
                "input_offset_start": None,
                "input_offset_end": None,
                "transaction_id": txn.txn_id,
                "commit_seq": txn.seq,
            }
        source = template.copy()
        source["ts_ms"] = ts_ms
        source["input_partition"] = origin.partition
        source["input_offset_start"] = origin.start
        source["input_offset_end"] = origin.end
        return source

    def encode(
        self,
        changes: Sequence[CapturedChange],
        origin: InputOrigin,
        txn: TransactionCounter,
        cleared_rows: Mapping[str, Sequence[Row]] | None = None,
        *,
        snapshot: bool = False,
        partition: int | None = None,
    ) -> list[OutRecord]:
        """The changelog records of one committed state transaction.

        ``cleared_rows`` holds, for each table the transaction cleared, the rows it had before.
        ``partition``: the task's changelog partition (partitioned state): every record goes
        there, and a truncate is written as the deletes of the task's rows only (a ``t`` event
        would clear the whole table for its readers).
        """
        out: list[OutRecord] = []
        sources: dict[str, dict[str, object]] = {}
        ts = int(time.time() * 1000)
        for change in changes:
            name = change.table
            writer, topic = self._writers[name], self.topics[name]
            source = sources.get(name)
            if source is None:
                source = sources[name] = self.source(name, origin, txn, ts, snapshot)
            if change.kind is ChangeKind.TRUNCATE:
                for every in range(self.partitions) if partition is None else ():
                    value = writer.value_of(
                        Op.TRUNCATE, None, None, source, ts_ms=ts, transaction=txn.next(topic)
                    )
                    out.append(OutRecord(topic, self.truncate_key, value, every))
                for row in (cleared_rows or {}).get(name, ()):
                    out += self._delete(writer, topic, row, source, ts, txn)
                continue
            if change.kind is ChangeKind.DELETE:
                assert change.before is not None
                out += self._delete(writer, topic, change.before, source, ts, txn)
                continue
            value = writer.value_of(
                _OPS[change.kind], change.before, change.after, source,
                ts_ms=ts, transaction=txn.next(topic),
            )  # fmt: skip
            out.append(OutRecord(topic, writer.key(change.key), value))
        if partition is not None:
            return [record._replace(partition=partition) for record in out]
        return out

    @staticmethod
    def _delete(
        writer: EventWriter,
        topic: str,
        before: Row,
        source: Mapping[str, object],
        ts: int,
        txn: TransactionCounter,
    ) -> list[OutRecord]:
        key = writer.key(before)
        value = writer.value_of(
            Op.DELETE, before, None, source, ts_ms=ts, transaction=txn.next(topic)
        )
        return [OutRecord(topic, key, value), OutRecord(topic, key, None)]

    def decode(self, record: StreamRecord) -> CapturedChange | None:
        """The change a changelog record carries; None for tombstones and truncates (the
        deletes that follow a truncate carry its effect on each key)."""
        name = self.table_of_topic.get(record.topic)
        if name is None:
            raise ChangeEventError(
                "not a changelog topic of this processor",
                topic=record.topic, partition=record.partition, offset=record.offset,
            )  # fmt: skip
        parsed = self._readers[name].parse_value(
            record.value, key=record.key,
            topic=record.topic, partition=record.partition, offset=record.offset,
        )  # fmt: skip
        if isinstance(parsed, Tombstone):
            return None
        if not isinstance(parsed, ChangeEvent):
            raise ChangeEventError(
                f"a changelog holds change events, not {parsed.kind}",
                topic=record.topic, partition=record.partition, offset=record.offset,
            )  # fmt: skip
        if parsed.op is Op.TRUNCATE:
            return None
        table = self.tables[name]
        image = parsed.after if parsed.op is not Op.DELETE else parsed.before
        if image is None:
            raise ChangeEventError(
                f"a {parsed.op.value} event without its row image", field="payload",
                topic=record.topic, partition=record.partition, offset=record.offset,
            )  # fmt: skip
        key = {c: image[c] for c in table.key}
        return CapturedChange(name, key, parsed.before, parsed.after, _KINDS[parsed.op])

    def restore_write(self, record: StreamRecord) -> tuple[str, bytes, bytes | None] | None:
        """The store write of a changelog record when it is the newest of its key: (table,
        encoded key, encoded row or None to delete); None when it changes nothing (a truncate,
        whose deletes follow it). Our own creates and updates take the fast path."""
        name = self.table_of_topic.get(record.topic)
        if name is not None and record.value is not None:
            row = self._after_readers[name].after(record.value)
            if row is not None:
                return (name, *self.tables[name].encode_row(row))
        if name is not None and record.value is None and record.key is not None:
            key = self._readers[name].parse_key(
                record.key, topic=record.topic, partition=record.partition, offset=record.offset
            )
            if key is None:  # the null key of a truncate event's tombstone
                return None
            return name, self.tables[name].encode_key(key.columns), None
        change = self.decode(record)
        if change is None:
            return None
        table = self.tables[change.table]
        if change.kind is ChangeKind.DELETE:
            return change.table, table.encode_key(change.key), None
        assert change.after is not None  # decode checks the image of a create/update/read
        return (change.table, *table.encode_row(change.after))


class TransactionCounter:
    """Numbers the events of one processor transaction (Debezium's ``transaction`` block)."""

    def __init__(self, prefix: str, seq: int) -> None:
        """``prefix``: the processor id, plus the member name of a partitioned processor."""
        self.seq = seq
        self.txn_id = f"{prefix}:{seq}"
        self.total = 0
        self.per_collection: dict[str, int] = {}

    def next(self, collection: str) -> dict[str, object]:
        """The ``transaction`` block of the next event written to ``collection``."""
        self.total += 1
        count = self.per_collection.get(collection, 0) + 1
        self.per_collection[collection] = count
        return {"id": self.txn_id, "total_order": self.total, "data_collection_order": count}
