"""The local log: the stream contract, plus its URL, segments, indexes, journal and locks."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.errors import ChangeEventError
from cdc.streams.local import (
    FencedWriterError,
    LocalLog,
    TopicConfigError,
    WriterLockTimeout,
    decode_segment_file,
)
from cdc.streams.local.journal import decode_records
from cdc.streams.local.locks import FileLock, holder_label
from cdc.streams.local.segments import list_segments, read_index, seek_position
from cdc.streams.protocol import EventStream, TopicPartition
from tests.cdc.streams.contract import CONTRACT_CHECKS, StreamOpener
from tests.cdc.streams.local_log_support import contents, open_log, write_txn


@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=lambda c: c.__name__)
def test_contract(check: Callable[[StreamOpener], None], tmp_path: Path) -> None:
    def open_stream() -> EventStream:
        return open_log(tmp_path)

    check(open_stream)


@pytest.mark.parametrize("check", CONTRACT_CHECKS[:6], ids=lambda c: c.__name__)
def test_contract_with_tiny_segments_and_fsync(
    check: Callable[[StreamOpener], None], tmp_path: Path
) -> None:
    def open_stream() -> EventStream:
        return open_log(tmp_path, segment_bytes=300, index_interval_bytes=100, sync=True)

    check(open_stream)


def test_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/abs?segment_bytes=1000&sync=false")
    assert log.url == f"local://{tmp_path}/abs"
    assert log.settings.segment_bytes == 1000 and not log.settings.sync
    log.close()
    monkeypatch.chdir(tmp_path)
    rel = LocalLog.from_url("local://rel/dir")
    assert rel.root == str(tmp_path / "rel" / "dir")
    rel.close()
    for bad in ("kafka://x", "local://", f"local://{tmp_path}?nope=1"):
        with pytest.raises(ValueError):
            LocalLog.from_url(bad)


def test_topic_names_and_partitions_are_checked(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for bad in ("", "a/b", "..", "x" * 250, "spaces no"):
        with pytest.raises(TopicConfigError):
            log.ensure_topic(bad)
    with pytest.raises(TopicConfigError, match=r"'t'.*partitions must be"):
        log.ensure_topic("t", 0)
    log.ensure_topic("t", 2)
    with pytest.raises(TopicConfigError, match="'t' exists with 2 partitions"):
        log.ensure_topic("t", 2, compacted=True)
    with pytest.raises(TopicConfigError, match="unknown topic 'nope'"):
        log.bounds("nope", 0)
    with pytest.raises(TopicConfigError, match="not partition 2"):
        log.read("t", 2, 0)
    with pytest.raises(TopicConfigError, match="not partition 5"):
        log.reader({TopicPartition("t", 5): 0})
    writer = log.writer("w")
    writer.begin()
    with pytest.raises(TopicConfigError):
        writer.send("t", b"k", b"v", partition=3)
    with pytest.raises(TopicConfigError):
        writer.send("nope", b"k", b"v")
    writer.abort()
    log.close()


def test_writer_misuse(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.ensure_topic("t", 1, compacted=True)
    writer = log.writer("w")
    with pytest.raises(RuntimeError, match="begin"):
        writer.send("t", b"k", b"v")
    writer.begin()
    with pytest.raises(RuntimeError, match="already"):
        writer.begin()
    with pytest.raises(ChangeEventError, match=r"field key.*topic t"):
        writer.send("t", None, b"v")
    writer.send("t", b"k", b"v")
    with pytest.raises(ValueError, match="reader with a group"):
        writer.commit({TopicPartition("t", 0): 1}, log.reader({}))
    with pytest.raises(ValueError, match="offset >= 0"):
        writer.commit({TopicPartition("t", 0): -1}, log.reader({}, group="g"))
    assert writer.commit() == {TopicPartition("t", 0): 1}
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.begin()
    log.close()


def test_keyless_records_are_spread_round_robin(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.ensure_topic("t", 4)
    writer = log.writer("w")
    writer.begin()
    for _ in range(40):
        writer.send("t", None, b"v")
    writer.commit()
    assert [log.bounds("t", p).end for p in range(4)] == [10, 10, 10, 10]
    log.close()


def test_segments_roll_and_the_sparse_index_finds_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=20_000, index_interval_bytes=1_000)
    log.ensure_topic("t", 1)
    rows = [(0, f"k{i}".encode(), os.urandom(random.randint(0, 300))) for i in range(3000)]
    for start in range(0, 3000, 700):
        write_txn(log, "t", rows[start : start + 700])
    directory = tmp_path / "topics" / "t" / "0"
    bases = list_segments(str(directory))
    assert len(bases) > 10
    assert all(os.path.getsize(directory / f"{b:020d}.log") <= 20_000 for b in bases)
    middle = bases[len(bases) // 2]
    entries = read_index(str(directory / f"{middle:020d}.idx"))
    assert len(entries) > 5
    fd = os.open(directory / f"{middle:020d}.log", os.O_RDONLY)
    target = entries[3].offset + 2
    assert seek_position(fd, entries, target) == entries[3].position
    os.close(fd)
    for start, stop in ((0, 10), (middle - 3, middle + 3), (target, target + 500), (2990, 3000)):
        got = [(r.offset, r.key, r.value) for r in log.read("t", 0, start, stop)]
        assert got == [(o, *rows[o][1:]) for o in range(start, stop)]
    log.close()


def test_segment_files_decode_standalone_like_read(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=5_000, index_interval_bytes=500)
    log.ensure_topic("t", 2)
    write_txn(log, "t", [(i % 2, f"k{i}".encode(), os.urandom(50)) for i in range(1000)])
    writer = log.writer("open")
    writer.begin()
    for _ in range(200):  # past the flush threshold: uncommitted frames and segments on disk
        writer.send("t", b"uncommitted", b"x" * 6_000, partition=1)
    assert len(list_segments(str(tmp_path / "topics" / "t" / "1"))) > 200
    for p in (0, 1):
        files = log.segment_files("t", p)
        assert files[0].base_offset == 0 and files[-1].end_offset == log.bounds("t", p).end
        assert [f.byte_limit is None for f in files] == [True] * (len(files) - 1) + [False]
        decoded = [
            (offset, key, value)
            for f in files
            for offset, _ts, key, value, _h in decode_segment_file(
                f.path, f.end_offset, byte_limit=f.byte_limit
            )
        ]
        assert decoded == contents(log, "t")[p]
        f = files[len(files) // 2]
        from_middle = list(decode_segment_file(f.path, f.end_offset, start=f.base_offset + 3))
        assert [r[0] for r in from_middle] == list(range(f.base_offset + 3, f.end_offset))
        start, stop = f.base_offset + 2, files[-1].base_offset + 1
        ranged = log.segment_files("t", p, start, stop)
        assert ranged[0] == f and ranged[-1] == files[-1]
        sliced = [r[0] for seg in ranged for r in seg.records(start, stop)]
        assert sliced == list(range(start, stop))
    writer.abort()
    log.close()


def test_offset_for_time_with_unordered_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=4_000, index_interval_bytes=300)
    log.ensure_topic("t", 1)
    rng = random.Random(7)
    stamps = [rng.randint(0, 10_000) + i * 5 for i in range(1500)]
    writer = log.writer("w")
    writer.begin()
    for ts in stamps:
        writer.send("t", b"k", b"v" * 20, partition=0, timestamp_ms=ts)
    writer.commit()
    for probe in [*rng.sample(range(0, 18_000), 60), -1, 0, max(stamps), max(stamps) + 1]:
        expected = next((o for o, ts in enumerate(stamps) if ts >= probe), len(stamps))
        assert log.offset_for_time("t", 0, probe) == expected
    log.close()


def test_journal_rotation_keeps_state_for_old_and_new_handles(tmp_path: Path) -> None:
    log = open_log(tmp_path, journal_rotate_bytes=2_000)
    watcher = open_log(tmp_path, journal_rotate_bytes=2_000)
    log.ensure_topic("t", 3)
    reader = watcher.reader({TopicPartition("t", p): 0 for p in range(3)}, group="g")
    writer = log.writer("w")
    received = 0
    for i in range(200):
        writer.begin()
        writer.send("t", f"k{i}".encode(), b"v")
        writer.commit({TopicPartition("src", 0): i + 1}, reader)
        received += len(reader.poll(timeout_s=0))
    records, _ = decode_records((tmp_path / "journal.log").read_bytes())
    assert records[0]["t"] == "snapshot"
    assert os.path.getsize(tmp_path / "journal.log") <= 2_500
    received += len(reader.poll(timeout_s=0.1))
    assert received == 200
    for handle in (watcher, open_log(tmp_path)):
        assert handle.committed_positions("g", "src") == {0: 200}
        assert sum(handle.bounds("t", p).end for p in range(3)) == 200
    writer.close()
    log.close()
    watcher.close()


def test_transactions_of_different_writers_are_serialized(tmp_path: Path) -> None:
    log = open_log(tmp_path, lock_timeout_s=0.2)
    other = open_log(tmp_path, lock_timeout_s=5)
    log.ensure_topic("t", 1)
    first, second = log.writer("a"), other.writer("b")
    first.begin()
    first.send("t", b"k", b"first", partition=0)
    with pytest.raises(WriterLockTimeout, match=f"process {os.getpid()}|another thread"):
        log.writer("c").begin()

    def later() -> None:
        time.sleep(0.2)
        first.commit()

    thread = threading.Thread(target=later)
    thread.start()
    second.begin()
    second.send("t", b"k", b"second", partition=0)
    second.commit()
    thread.join()
    assert [r.value for r in log.read("t", 0, 0)] == [b"first", b"second"]
    log.close()
    other.close()


def test_fencing_in_process_aborts_the_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.ensure_topic("t", 1)
    old = log.writer("same")
    old.begin()
    old.send("t", b"k", b"zombie", partition=0)
    new = log.writer("same")
    new.begin()
    new.send("t", b"k", b"fresh", partition=0)
    assert new.commit() == {TopicPartition("t", 0): 1}
    for call in (old.begin, old.commit, old.abort):
        with pytest.raises(FencedWriterError):
            call()
    assert [r.value for r in log.read("t", 0, 0)] == [b"fresh"]
    log.close()


def test_reader_positions_and_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.ensure_topic("t", 1)
    assert log.bounds("t", 0).end == 0
    write_txn(log, "t", [(0, b"k", str(i).encode()) for i in range(5)])
    reader = log.reader({TopicPartition("t", 0): 2})
    assert [r.offset for r in reader.poll()] == [2, 3, 4]
    assert reader.positions() == {TopicPartition("t", 0): 5}
    reader.close()
    with pytest.raises(RuntimeError):
        reader.poll()
    log.close()


def test_a_lock_names_its_holder_while_held(tmp_path: Path) -> None:
    """``holder_label``: the label of the live holder, None when free (what ``task_owners`` of
    the local log reads); probing takes nothing."""
    path = str(tmp_path / "task-0")
    assert holder_label(path) is None  # no file yet
    lock = FileLock(path, label="member-a")
    lock.acquire(1.0)
    assert holder_label(path) == "member-a"
    assert holder_label(path) == "member-a"  # the probe left the lock with its holder
    lock.release()
    assert holder_label(path) is None  # the file keeps the old token, but nobody holds it
    other = FileLock(path, label="member-b")
    other.acquire(1.0)
    assert holder_label(path) == "member-b"
    other.release()
    with pytest.raises(ValueError, match="one word"):
        FileLock(path, label="two words")
