"""Contract checks of ``read_compacted``: what a compaction of a range keeps, and its budget."""

from __future__ import annotations

from collections import defaultdict

import pytest

from cdc.streams.protocol import (
    CompactedRange,
    CompactionOverBudget,
    EventStream,
    StreamRecord,
)
from tests.cdc.streams.contract_support import StreamOpener, new_topic, opened

_EACH = frozenset({b"each-a", b"each-b"})


def _history(stream: EventStream, topic: str) -> None:
    """25,000 records over 3,000 keys in transactions of 4,000 (the third aborted, the last
    left aborted at the tail): tombstones, keys only ever deleted, keys of ``_EACH`` and no key
    at all, enough records for a read to take many batches."""
    writer = stream.writer(new_topic("txn"))
    sent = 0
    for txn in range(8):
        writer.begin()
        for _ in range(4_000 if txn < 7 else 500):
            i = sent
            sent += 1
            key: bytes | None = f"k{(i * 7919) % 3_000}".encode()
            if i % 997 == 0:
                key = None
            elif i % 1_499 == 0:
                key = sorted(_EACH)[i % 2]
            elif i % 11 == 0:
                key = f"deleted-only-{i % 50}".encode()
            value = None if i % 7 == 0 or (key or b"").startswith(b"deleted") else b"v%d" % i
            writer.send(topic, key, value, partition=0)
        if txn in (2, 7):
            writer.abort()
        else:
            writer.commit()
    writer.close()


def _reference(records: list[StreamRecord]) -> CompactedRange:
    """The compaction of ``records`` by its definition: per key the newest record and the newest
    with a value, taken from the records grouped by key."""
    by_key: dict[bytes, list[StreamRecord]] = defaultdict(list)
    each = [r for r in records if r.key is None or r.key in _EACH]
    for r in records:
        if r.key is not None and r.key not in _EACH:
            by_key[r.key].append(r)
    live = {k: [r for r in rs if r.value is not None][-1] for k, rs in by_key.items()
            if any(r.value is not None for r in rs)}  # fmt: skip
    gone = {k: rs[-1] for k, rs in by_key.items() if rs[-1].value is None}
    return CompactedRange(live, gone, each)


def check_compacted_read_keeps_the_newest_per_key(open_stream: StreamOpener) -> None:
    """``read_compacted`` keeps of ``read``'s records what compaction defines, for any range."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 1)
        _history(stream, topic)
        records = list(stream.read(topic, 0, 0))
        assert 20_000 < len(records) < 25_000
        offsets = [r.offset for r in records]
        end = stream.bounds(topic, 0).end
        ranges = [(0, None), (offsets[3_001], offsets[17_500]), (offsets[9_000], 10**12),
                  (offsets[-1], end), (end, None), (offsets[10], offsets[10])]  # fmt: skip
        for start, stop in ranges:
            expected = _reference(list(stream.read(topic, 0, start, stop)))
            kept = stream.read_compacted(topic, 0, start, stop, each_keys=_EACH)
            assert kept == expected, (start, stop)
        assert _reference(records).live and _reference(records).gone


def check_compacted_read_stops_over_its_budget(open_stream: StreamOpener) -> None:
    """Past ``max_held_bytes`` of live values the read stops, naming the partition."""
    topic = new_topic()
    with opened(open_stream) as stream:
        stream.ensure_topic(topic, 2)
        _history(stream, topic)  # all in partition 0
        held = sum(len(r.value or b"") for r in stream.read_compacted(topic, 0, 0).live.values())
        assert stream.read_compacted(topic, 0, 0, max_held_bytes=held).live
        with pytest.raises(CompactionOverBudget, match=f"{topic} partition 0 holds") as over:
            stream.read_compacted(topic, 0, 0, max_held_bytes=held // 2)
        assert (over.value.topic, over.value.partition) == (topic, 0)
        assert held // 2 < over.value.held_bytes and over.value.records > 0
        assert stream.read_compacted(topic, 1, 0, max_held_bytes=0) == CompactedRange({}, {}, [])
