"""``LocalLog.read_compacted`` from the segment files in two C passes (``newest``) against its
Python twin (``compact_records`` over ``read``): the same records over many segments and any
range, the same damage found, the same budget."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cdc.streams.latest import HeldBudget, compact_records
from cdc.streams.local import newest
from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.log import LocalLog
from cdc.streams.protocol import CompactedRange, CompactionOverBudget
from tests.cdc.streams.local_log_support import open_log

pytestmark = pytest.mark.skipif(
    newest.native_compact_frames is None,
    reason="native_frames is not built (make compiled builds it; make pure removes it)",
)
EACH = frozenset({b"each"})
TOPIC = "t"


def _log(tmp_path: Path) -> LocalLog:
    """3,000 records over 200 keys in small segments: updates, tombstones, keys deleted and
    written again, keys only ever deleted, null keys, ``EACH`` keys, a header now and then."""
    log = open_log(tmp_path, segment_bytes=4_000, index_interval_bytes=300)
    log.ensure_topic(TOPIC, 2)  # not compacted: a null key is allowed, offsets are dense
    writer = log.writer("w")
    for txn in range(10):
        writer.begin()
        for i in range(txn * 300, txn * 300 + 300):
            key: bytes | None = b"k%d" % ((i * 37) % 200)
            if i % 101 == 0:
                key = None
            elif i % 89 == 0:
                key = b"each"
            elif i % 13 == 0:
                key = b"gone-%d" % (i % 7)
            value = None if i % 9 == 0 or (key or b"").startswith(b"gone") else b"v%d" % i
            headers = [("h", b"%d" % i)] if i % 50 == 0 else []
            writer.send(TOPIC, key, value, partition=i % 2, headers=headers)
        writer.commit()
    writer.close()
    return log


def _twin(log: LocalLog, start: int, stop: int | None, budget: int | None) -> CompactedRange:
    records = log.read(TOPIC, 0, start, stop)
    return compact_records(records, EACH, HeldBudget(TOPIC, 0, budget))


def _native(log: LocalLog, start: int, stop: int | None, budget: int | None) -> CompactedRange:
    return newest.newest_records(log, TOPIC, 0, start, stop, EACH, HeldBudget(TOPIC, 0, budget))


def test_the_passes_keep_what_the_twin_keeps_over_segments(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert len(log.segment_files(TOPIC, 0)) > 10
    end = log.bounds(TOPIC, 0).end
    for start, stop in [(0, None), (0, end), (1, 700), (333, 1_200), (end - 1, None),
                        (end, None), (500, 500), (1_499, 10**9)]:  # fmt: skip
        got = _native(log, start, stop, None)
        assert got == _twin(log, start, stop, None), (start, stop)
    whole = _native(log, 0, None, None)
    assert whole.live and whole.gone and whole.each
    assert any(r.headers for r in whole.live.values())


def test_the_budget_stops_the_passes_as_it_stops_the_twin(tmp_path: Path) -> None:
    log = _log(tmp_path)
    held = sum(len(r.value or b"") for r in _twin(log, 0, None, None).live.values())
    assert _native(log, 0, None, held) == _twin(log, 0, None, held)
    with pytest.raises(CompactionOverBudget, match=f"{TOPIC} partition 0 holds"):
        _native(log, 0, None, held // 2)


def test_damage_is_found_where_the_twin_finds_it(tmp_path: Path) -> None:
    log = _log(tmp_path)
    segment = log.segment_files(TOPIC, 0)[3]
    data = bytearray(Path(segment.path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(segment.path).write_bytes(bytes(data))
    with pytest.raises(CorruptLogError) as twin:
        _twin(log, 0, None, None)
    with pytest.raises(CorruptLogError) as native:
        _native(log, 0, None, None)
    assert native.value.path == segment.path and twin.value.offset == native.value.offset
    assert str(native.value).split(" at ")[0] == str(twin.value).split(" at ")[0]
    # A range that ends before the damaged segment reads
    assert _native(log, 0, segment.base_offset, None) == _twin(log, 0, segment.base_offset, None)


def test_a_cut_segment_is_a_partial_frame(tmp_path: Path) -> None:
    log = _log(tmp_path)
    segment = log.segment_files(TOPIC, 0)[2]
    data = Path(segment.path).read_bytes()
    Path(segment.path).write_bytes(data[:-5])
    with pytest.raises(CorruptLogError, match="partial frame"):
        _native(log, 0, None, None)


def test_a_segment_merged_away_since_the_listing_sends_the_read_the_cursors_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(tmp_path)
    listed = log.segment_files(TOPIC, 0)
    moved = [replace(listed[0], path=listed[0].path + ".merged"), *listed[1:]]
    monkeypatch.setattr(log, "segment_files", lambda *_: moved)
    assert _native(log, 0, None, None) == _twin(log, 0, None, None)
