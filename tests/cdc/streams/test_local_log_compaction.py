"""Compaction of the local log: latest record per key, stable offsets, crash safety."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.latest import HeldBudget, compact_records
from cdc.streams.local import LocalLog, TopicConfigError
from cdc.streams.protocol import StreamRecord, TopicPartition
from tests.cdc.streams.local_log_support import open_log

NOW = 10_000_000
RETENTION = 1_000
Row = tuple[int, bytes | None, bytes | None, int]


def _settings() -> dict[str, Any]:
    return {"segment_bytes": 2_000, "index_interval_bytes": 200, "delete_retention_ms": RETENTION}


def _fill(log: LocalLog, seed: int, txns: int = 30) -> None:
    """Updates of 40 keys over 2 partitions; some tombstones are old, some recent."""
    rng = random.Random(seed)
    writer = log.writer("fill")
    for _ in range(txns):
        writer.begin()
        for _ in range(20):
            key = f"key-{rng.randrange(40)}".encode()
            tombstone = rng.random() < 0.15
            old = rng.random() < 0.5
            ts = NOW - (5 * RETENTION if old else RETENTION // 2) + rng.randrange(100)
            value = None if tombstone else os.urandom(rng.randrange(1, 60))
            writer.send("c", key, value, timestamp_ms=ts)
        writer.commit()
    writer.close()


def _rows(log: LocalLog, partition: int, start: int = 0) -> list[Row]:
    return [(r.offset, r.key, r.value, r.timestamp_ms) for r in log.read("c", partition, start)]


def _expected(full: list[Row], active_base: int) -> list[Row]:
    """The rows compaction keeps: the active segment, and elsewhere the latest per key unless
    it is a tombstone older than the retention."""
    latest = {key: offset for offset, key, _, _ in full}

    def kept(row: Row) -> bool:
        offset, key, value, ts = row
        if offset >= active_base:
            return True
        return latest[key] == offset and not (value is None and NOW - ts > RETENTION)

    return [row for row in full if kept(row)]


def _active_base(log: LocalLog, partition: int) -> int:
    return log.segment_files("c", partition)[-1].base_offset


def _compacted_log(directory: Path, seed: int = 1) -> LocalLog:
    log = open_log(directory, **_settings())
    log.ensure_topic("c", 2, compacted=True)
    _fill(log, seed)
    return log


def test_compaction_keeps_the_latest_record_per_key(tmp_path: Path) -> None:
    log = _compacted_log(tmp_path)
    before = {p: _rows(log, p) for p in (0, 1)}
    bounds = {p: log.bounds("c", p) for p in (0, 1)}
    files = {p: len(log.segment_files("c", p)) for p in (0, 1)}
    results = log.compact("c", now_ms=NOW)
    for p in (0, 1):
        expected = _expected(before[p], _active_base(log, p))
        assert _rows(log, p) == expected
        assert len(expected) < len(before[p]) / 2
        assert results[p].records_before > results[p].records_after
        assert log.bounds("c", p) == bounds[p]
        assert len(log.segment_files("c", p)) < files[p]
        for start in random.Random(p).sample(range(bounds[p].end), 15):
            assert _rows(log, p, start) == [row for row in expected if row[0] >= start]
        decoded = [
            (offset, key, value, ts)
            for f in log.segment_files("c", p)
            for offset, ts, key, value, _ in f.records()
        ]
        assert decoded == expected
        for start in (0, bounds[p].end // 3):  # read over the gaps compaction leaves
            twin = compact_records(log.read("c", p, start), frozenset(), HeldBudget("c", p, None))
            assert log.read_compacted("c", p, start) == twin
        for probe in (0, NOW - 5 * RETENTION + 50, NOW - RETENTION // 2 + 50, NOW + 1):
            first = next((o for o, _, _, ts in expected if ts >= probe), bounds[p].end)
            assert log.offset_for_time("c", p, probe) == first
    log.compact("c", now_ms=NOW)
    assert {p: _rows(log, p) for p in (0, 1)} == {
        p: _expected(before[p], _active_base(log, p)) for p in (0, 1)
    }
    log.close()


def test_compaction_applies_to_compacted_topics_only(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.ensure_topic("plain", 1)
    with pytest.raises(TopicConfigError, match="'plain' is not compacted"):
        log.compact("plain")
    log.close()


def test_a_reader_continues_across_compaction(tmp_path: Path) -> None:
    log = _compacted_log(tmp_path)
    before = {r[0]: r for r in _rows(log, 0)}
    reader = log.reader({TopicPartition("c", 0): 0})
    got: list[StreamRecord] = reader.poll(max_records=len(before) // 3)
    position = reader.positions()[TopicPartition("c", 0)]
    other = open_log(tmp_path, **_settings())
    other.compact("c", now_ms=NOW)
    while batch := reader.poll(max_records=7, timeout_s=0):
        got += batch
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    assert all((r.offset, r.key, r.value, r.timestamp_ms) == before[r.offset] for r in got)
    survivors = {row[0] for row in _rows(log, 0)}
    assert {o for o in survivors if o >= position} <= set(offsets)
    reader.close()
    other.close()
    log.close()


class SimulatedCrash(Exception):
    pass


def _crash_after(monkeypatch: pytest.MonkeyPatch, steps: int | None) -> list[str]:
    """Count (and, after ``steps`` of them, fail) the renames and deletions compaction does."""
    done: list[str] = []
    for name in ("replace", "unlink"):
        original: Callable[..., None] = getattr(os, name)

        def step(*args: Any, _original: Callable[..., None] = original, _name: str = name) -> None:
            if steps is not None and len(done) >= steps:
                raise SimulatedCrash(_name)
            done.append(_name)
            _original(*args)

        monkeypatch.setattr(os, name, step)
    return done


def test_a_crash_at_any_step_of_compaction_leaves_a_valid_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pristine = tmp_path / "pristine"
    log = _compacted_log(pristine, seed=5)
    before = {p: _rows(log, p) for p in (0, 1)}
    final = {p: _expected(before[p], _active_base(log, p)) for p in (0, 1)}
    log.close()
    shutil.copytree(pristine, tmp_path / "count")
    with monkeypatch.context() as patch:
        steps = _crash_after(patch, None)
        open_log(tmp_path / "count", **_settings()).compact("c", now_ms=NOW)
    assert len(steps) > 10
    for crash_at in range(len(steps)):
        directory = tmp_path / f"crash-{crash_at}"
        shutil.copytree(pristine, directory)
        with monkeypatch.context() as patch:
            _crash_after(patch, crash_at)
            with pytest.raises(SimulatedCrash):
                open_log(directory, **_settings()).compact("c", now_ms=NOW)
        reopened = open_log(directory, **_settings())
        for p in (0, 1):
            segments = reopened.segment_files("c", p)
            bulk = [(o, k, v, ts) for f in segments for o, ts, k, v, _ in f.records()]
            for rows in (_rows(reopened, p), bulk):
                assert set(rows) <= set(before[p])
                assert set(final[p]) <= set(rows)
                assert [r[0] for r in rows] == sorted({r[0] for r in rows})
        reopened.compact("c", now_ms=NOW)
        assert {p: _rows(reopened, p) for p in (0, 1)} == final
        assert not list(directory.rglob("*.cleaned"))
        reopened.close()
        shutil.rmtree(directory)


def test_automatic_compaction_bounds_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path, auto_compact_bytes=6_000, **_settings())
    log.ensure_topic("c", 2, compacted=True)
    _fill(log, seed=9, txns=80)
    for p in (0, 1):
        rows = _rows(log, p)
        assert len(rows) < log.bounds("c", p).end / 2
        keys_seen = {key for _, key, _, _ in rows}
        assert len(keys_seen) <= 40
    log.close()
