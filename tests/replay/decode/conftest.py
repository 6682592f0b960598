"""Factories for the decoding tests: raw record frames, published records, our own changelog."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.connector.changelog import ChangelogConnector, InputOrigin, TransactionCounter
from cdc.state.changes import CapturedChange, ChangeKind, Row
from cdc.state.table import StateTable
from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream
from replay.reading.sources import RAW_SCHEMA
from tests.conftest import DEBEZIUM_FIXTURES

PUBLISHED = DEBEZIUM_FIXTURES


@pytest.fixture(autouse=True)
def _few_shuffle_partitions(spark: Any) -> Iterator[None]:
    """Two shuffle partitions while these tests run: their data is tiny, tasks cost time."""
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", previous)


Record = tuple[str, int, int, bytes | None, bytes | None, int]
"""A raw record: topic, partition, offset, key, value, timestamp_ms."""


def published(name: str) -> bytes:
    """The bytes of one published Debezium record."""
    return (PUBLISHED / name).read_bytes()


PLACEHOLDER = "__debezium_unavailable_value"
"""Debezium's text for a value it could not read (unchanged TOAST)."""


def pg_update(lsn: int, row_id: int, description: str, name: str) -> bytes:
    """A published PostgreSQL update (schemas on) of row ``row_id`` of ``products`` at ``lsn``."""
    document = json.loads(published("pg_1x_update_replica_full_with_schema.json"))
    payload = document["payload"]
    payload["after"] = {**payload["after"], "id": row_id, "name": name, "description": description}
    payload["source"] = {**payload["source"], "lsn": lsn}
    return json.dumps(document).encode()


def raw_frame(spark: Any, records: Iterable[Record]) -> Any:
    """A RAW_SCHEMA DataFrame of ``records``."""
    return spark.createDataFrame(list(records), RAW_SCHEMA)


def as_records(topic: str, pairs: Sequence[tuple[bytes | None, bytes | None]]) -> list[Record]:
    """(key, value) pairs as the records of partition 0 from offset 0."""
    return [(topic, 0, i, k, v, 1_700_000_000_000 + i) for i, (k, v) in enumerate(pairs)]


ACCOUNTS = StateTable(
    "accounts",
    {
        "id": int,
        "name": str,
        "balance": Decimal,
        "opened": date,
        "seen": datetime,
        "doc": dict,
        "blob": bytes,
        "active": bool,
        "score": float,
    },
    key="id",
    scales={"balance": 2},
)


def account(id: int, **changes: Any) -> Row:
    """A row of ``ACCOUNTS`` (``changes`` replace columns)."""
    row: Row = {
        "id": id,
        "name": f"name-{id}",
        "balance": Decimal("-12345678901234567890123456789012.34"),
        "opened": date(1969, 12, 31),
        "seen": datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
        "doc": {"n": [1, 2], "s": "x"},
        "blob": b"\x00\xff",
        "active": True,
        "score": 0.5,
    }
    row.update(changes)
    return row


class Changelog:
    """Changelog records of ``ACCOUNTS`` as the event source connector encodes them, with the
    offsets a log would give them (one commit per ``commit`` call)."""

    def __init__(self, partitions: int = 1, *, schemas_enable: bool = True) -> None:
        self.connector = ChangelogConnector(
            "proc", [ACCOUNTS], partitions=partitions, schemas_enable=schemas_enable
        )
        self.topic = self.connector.topics[ACCOUNTS.name]
        self.partitions = partitions
        self.records: list[Record] = []
        self.seq = 0
        self._next = [0] * partitions

    def commit(
        self, *changes: CapturedChange, cleared: Sequence[Row] = (), partition: int | None = None
    ) -> str:
        """Append one committed transaction; returns its transaction id. ``partition`` puts its
        keyed records there (as a topic repartitioning would) instead of murmur2 of the key."""
        self.seq += 1
        txn = TransactionCounter("proc", self.seq)
        origin = InputOrigin("input", 0, self.seq * 10, self.seq * 10 + 1)
        cleared_rows = {ACCOUNTS.name: list(cleared)} if cleared else None
        for out in self.connector.encode(list(changes), origin, txn, cleared_rows):
            target = out.partition
            if target is None:
                assert out.key is not None
                target = partition_for(out.key, self.partitions) if partition is None else partition
            offset = self._next[target]
            self._next[target] += 1
            self.records.append((out.topic, target, offset, out.key, out.value, offset))
        return txn.txn_id

    def upsert(self, before: Row | None, after: Row, partition: int | None = None) -> str:
        change = CapturedChange.between(ACCOUNTS.name, {"id": after["id"]}, before, after)
        return self.commit(change, partition=partition)

    def delete(self, before: Row, partition: int | None = None) -> str:
        change = CapturedChange.between(ACCOUNTS.name, {"id": before["id"]}, before, None)
        return self.commit(change, partition=partition)

    def truncate(self, cleared: Sequence[Row]) -> str:
        change = CapturedChange(ACCOUNTS.name, {}, None, None, ChangeKind.TRUNCATE)
        return self.commit(change, cleared=cleared)

    def append(self, partition: int, key: bytes | None, value: bytes | None) -> int:
        """Append one raw record (e.g. a bad one) to ``partition``; returns its offset."""
        offset = self._next[partition]
        self._next[partition] += 1
        self.records.append((self.topic, partition, offset, key, value, offset))
        return offset


def by_offset(rows: Iterable[Any]) -> list[Any]:
    """Decoded rows sorted by (topic, partition, offset)."""
    return sorted(rows, key=lambda r: (r["__topic"], r["__partition"], r["__offset"]))


def json_equal(left: Any, right: Any) -> bool:
    """Equality of two JSON texts (or lists of them) as JSON values."""
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, str) and isinstance(right, str):
        return bool(json.loads(left) == json.loads(right))
    return bool(left == right)


ACCOUNT_COLUMNS = tuple(ACCOUNTS.columns)


def comparable(row: Any) -> dict[str, Any]:
    """An ``ACCOUNTS`` row (a dict, or a collected Spark row) in a form both compare in: the
    zoned timestamp as a UTC instant, the JSON column parsed."""
    values = row if isinstance(row, dict) else row.asDict()
    out = {name: values.get(name) for name in ACCOUNT_COLUMNS}
    if isinstance(out["seen"], datetime):
        out["seen"] = out["seen"].astimezone(UTC)
    if isinstance(out["doc"], str):
        out["doc"] = json.loads(out["doc"])
    return out


Written = Callable[["Changelog"], EventStream]
"""Writes a changelog to a new topic of a real stream (the ``written`` fixture)."""


@pytest.fixture(params=["local", "kafka"])
def written(request: pytest.FixtureRequest, tmp_path: Path, unique_name: Any) -> Iterator[Written]:
    """Factory: a changelog written record by record to a new topic (``log.topic`` set to it)
    of a real stream, the local log or the Kafka broker."""
    if request.param == "kafka":
        url = f"kafka://{request.getfixturevalue('kafka_bootstrap')}"
    else:
        url = f"local://{tmp_path}/log"
    stream = open_stream(url)

    def write(log: Changelog) -> EventStream:
        log.topic = unique_name("guessed")
        stream.ensure_topic(log.topic, log.partitions, compacted=True)
        writer = stream.writer(unique_name("writer"))
        writer.begin()
        for _, partition, _, key, value, _ in log.records:
            writer.send(log.topic, key, value, partition=partition)
        writer.commit()
        writer.close()
        return stream

    yield write
    stream.close()
