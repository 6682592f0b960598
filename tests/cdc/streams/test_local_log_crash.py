"""Crash safety of the local log: torn tails, damaged files, and a writer killed with SIGKILL."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cdc
from cdc.streams.local import CorruptLogError, LocalLog
from cdc.streams.local.journal import JOURNAL_FILE
from cdc.streams.protocol import StreamReader, TopicPartition
from tests.cdc.streams import local_log_child
from tests.cdc.streams.local_log_support import contents, open_log, write_txn

Contents = dict[int, list[tuple[int, bytes | None, bytes | None]]]


def _build_history(directory: Path) -> tuple[list[int], list[Contents]]:
    """Commit 12 transactions; return the journal size and the contents after each one."""
    log = open_log(directory, segment_bytes=3_000, index_interval_bytes=200)
    log.ensure_topic("t", 2)
    sizes, history = [os.path.getsize(directory / JOURNAL_FILE)], [contents(log, "t")]
    rng = random.Random(1)
    for n in range(12):
        write_txn(
            log, "t", [(i % 2, b"k%d" % i, os.urandom(rng.randint(1, 200))) for i in range(30)]
        )
        sizes.append(os.path.getsize(directory / JOURNAL_FILE))
        history.append(contents(log, "t"))
        assert history[-1] != history[-2], n
    log.close()
    return sizes, history


def _leave_uncommitted_tail(directory: Path) -> None:
    """Flush frames of a transaction that never commits (the writer 'dies' holding them)."""
    log = open_log(directory, segment_bytes=3_000, index_interval_bytes=200)
    writer = log.writer("doomed")
    writer.begin()
    for i in range(400):
        size = 10 if i < 20 else 3_000
        writer.send("t", b"x", os.urandom(size), partition=i % 2)
    writer._lock.release()  # crash: the lock dies with the process, the files stay as they are


def _uncommitted_regions(directory: Path) -> list[tuple[Path, int, int]]:
    """(file, first uncommitted byte, size) of every partition file holding uncommitted bytes."""
    log = open_log(directory)
    regions = []
    for p in (0, 1):
        view = log._journal.state.partition(TopicPartition("t", p))
        for segment in (directory / "topics" / "t" / str(p)).glob("*.log"):
            base, size = int(segment.stem), segment.stat().st_size
            if base == view.segment_base and size > view.segment_bytes:
                regions.append((segment, view.segment_bytes, size))
            elif base > view.segment_base:
                regions.append((segment, 0, size))
    log.close()
    return regions


def _check_writable(directory: Path, expected: Contents) -> None:
    """The log shows ``expected`` and a new transaction continues right after it."""
    log = open_log(directory, segment_bytes=3_000, index_interval_bytes=200)
    assert contents(log, "t") == expected
    write_txn(log, "t", [(0, b"after", b"crash"), (1, b"after", b"crash")], txn_id="next")
    for p in (0, 1):
        ends = expected[p][-1][0] + 1 if expected[p] else 0
        assert contents(log, "t")[p] == [*expected[p], (ends, b"after", b"crash")]
    log.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int], list[Contents]]:
    directory = tmp_path_factory.mktemp("history")
    sizes, snapshots = _build_history(directory)
    _leave_uncommitted_tail(directory)
    return directory, sizes, snapshots


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("seed", range(12))
def test_torn_or_damaged_segment_tails_are_truncated(
    history: tuple[Path, list[int], list[Contents]], tmp_path: Path, seed: int
) -> None:
    source, _, snapshots = history
    directory = _copy(source, tmp_path / "log")
    rng = random.Random(seed)
    regions = _uncommitted_regions(directory)
    assert len(regions) > 100
    assert {path.parent.name for path, start, _ in regions if start > 0} == {"0", "1"}
    for path, start, size in rng.sample(regions, 5) + [r for r in regions if r[1] > 0]:
        cut = rng.randint(start, size)
        with open(path, "r+b") as f:
            f.truncate(cut)
            if rng.random() < 0.5:
                f.seek(rng.randint(start, cut))
                f.write(os.urandom(rng.randint(1, 50)))
    _check_writable(directory, snapshots[-1])
    assert _uncommitted_regions(directory) == []


@pytest.mark.parametrize("seed", range(20))
def test_a_torn_journal_leaves_a_prefix_of_the_transactions(
    history: tuple[Path, list[int], list[Contents]], tmp_path: Path, seed: int
) -> None:
    source, sizes, snapshots = history
    directory = _copy(source, tmp_path / "log")
    rng = random.Random(seed)
    cut = rng.randint(sizes[0], sizes[-1])
    damage = rng.random() < 0.5
    with open(directory / JOURNAL_FILE, "r+b") as f:
        if damage:
            f.seek(cut - 1)
            byte = f.read(1)
            f.seek(cut - 1)
            f.write(bytes([byte[0] ^ (1 << rng.randint(0, 7))]))
            cut -= 1
        else:
            f.truncate(cut)
    survivors = max(i for i, size in enumerate(sizes) if size <= cut)
    reader_only = open_log(directory)
    assert contents(reader_only, "t") == snapshots[survivors]
    reader_only.close()
    _check_writable(directory, snapshots[survivors])


@pytest.mark.parametrize("seed", range(10))
def test_damaged_committed_data_is_reported_never_returned(
    history: tuple[Path, list[int], list[Contents]], tmp_path: Path, seed: int
) -> None:
    source, _, snapshots = history
    directory = _copy(source, tmp_path / "log")
    rng = random.Random(seed)
    partition = rng.randint(0, 1)
    segments = sorted((directory / "topics" / "t" / str(partition)).glob("*.log"))
    log = open_log(directory)
    view = log._journal.state.partition(TopicPartition("t", partition))
    victim = rng.choice([s for s in segments if int(s.stem) <= view.segment_base])
    committed = (
        view.segment_bytes if int(victim.stem) == view.segment_base else victim.stat().st_size
    )
    where = rng.randrange(committed)
    with open(victim, "r+b") as f:
        if rng.random() < 0.5:
            f.seek(where)
            byte = f.read(1)
            f.seek(where)
            f.write(bytes([byte[0] ^ (1 << rng.randint(0, 7))]))
        else:
            f.truncate(where)
    expected = snapshots[-1][partition]
    got = []
    with pytest.raises(CorruptLogError, match=f"partition {partition}"):
        for record in log.read("t", partition, 0):
            got.append((record.offset, record.key, record.value))
    assert got == expected[: len(got)]
    other = [(r.offset, r.key, r.value) for r in log.read("t", 1 - partition, 0)]
    assert other == snapshots[-1][1 - partition]
    log.close()


def test_damaged_indexes_only_cost_a_scan(
    history: tuple[Path, list[int], list[Contents]], tmp_path: Path
) -> None:
    source, _, snapshots = history
    directory = _copy(source, tmp_path / "log")
    rng = random.Random(3)
    for index in directory.rglob("*.idx"):
        data = bytearray(index.read_bytes())
        for _ in range(len(data) // 10):
            data[rng.randrange(len(data))] = rng.randrange(256)
        index.write_bytes(bytes(data[: rng.randint(0, len(data))]))
    log = open_log(directory)
    for p in (0, 1):
        for start in rng.sample(range(len(snapshots[-1][p])), 10):
            got = [(r.offset, r.key, r.value) for r in log.read("t", p, start)]
            assert got == snapshots[-1][p][start:]
    log.close()


def _spawn(directory: Path, segment_bytes: int, per_txn: int, sync: bool) -> subprocess.Popen[str]:
    root = str(Path(cdc.__file__).resolve().parents[1])
    args = [str(directory), str(segment_bytes), str(per_txn), "1" if sync else "0"]
    return subprocess.Popen(
        [sys.executable, local_log_child.__file__, *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
        cwd=root,
    )


def test_sigkilled_writer_leaves_exactly_the_committed_transactions(tmp_path: Path) -> None:
    rng = random.Random(2024)
    directory = tmp_path / "log"
    watcher: LocalLog | None = None
    side: StreamReader | None = None
    seen: list[bytes | None] = []
    sizes: list[int] = []  # records per partition of each committed transaction
    for trial in range(6):
        per_txn = rng.choice([3, 40, 200])
        segment_bytes = rng.choice([2_000, 20_000, 1 << 20])
        child = _spawn(directory, segment_bytes, per_txn, sync=trial % 2 == 0)
        assert child.stdout is not None
        ready = child.stdout.readline().split()
        assert ready == ["ready", str(len(sizes))]
        if watcher is None:
            watcher = open_log(directory)
            side = watcher.reader({TopicPartition("side", 0): 0})
        time.sleep(rng.uniform(0.05, 0.5))
        os.kill(child.pid, signal.SIGKILL)
        printed = child.stdout.read().split()
        child.wait()
        child.stdout.close()
        last_printed = int(printed[-1]) + 1 if printed else len(sizes)
        log = open_log(directory)
        committed = log.committed_positions("g", "src").get(0, 0)
        assert committed in (last_printed, last_printed + 1), (trial, committed, last_printed)
        sizes += [per_txn] * (committed - len(sizes))
        for p in range(local_log_child.OUT_PARTITIONS):
            records = list(log.read("out", p, 0))
            assert [r.value for r in records] == [
                f"{n}:{p}:{i}".encode() * 3 for n, size in enumerate(sizes) for i in range(size)
            ]
            assert [r.offset for r in records] == list(range(len(records)))
            assert log.bounds("out", p).end == len(records)
        expected_side = [str(n).encode() for n in range(committed)]
        assert [r.value for r in log.read("side", 0, 0)] == expected_side
        assert side is not None
        while len(seen) < committed:
            seen += [r.value for r in side.poll(timeout_s=1)]
        assert seen == expected_side
        log.close()
    assert watcher is not None
    watcher.close()
    assert len(sizes) > 6


def test_a_writer_recovers_what_another_writer_left_behind(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, index_interval_bytes=100)
    log.ensure_topic("t", 1)
    survivor = log.writer("survivor")
    expected: list[bytes | None] = []

    def commit(label: str, count: int) -> None:
        survivor.begin()
        for i in range(count):
            survivor.send("t", b"k", f"{label}{i}".encode() * 10, partition=0)
            expected.append(f"{label}{i}".encode() * 10)
        survivor.commit()

    commit("a", 5)
    other = open_log(tmp_path, segment_bytes=500, index_interval_bytes=100)
    doomed = other.writer("doomed")
    doomed.begin()
    # The first record does not fit the committed active segment, which stays as it was; the
    # next ones fill the new segment with offsets the survivor is about to reuse.
    doomed.send("t", b"k", b"z" * 215, partition=0)
    for i in range(20):
        doomed.send("t", b"k", f"zombie{i:02d}".encode() * 2, partition=0)
    doomed._touched[("t", 0)].flush()
    doomed._lock.release()  # dies: the lock goes, its files stay
    commit("b", 30)
    assert [r.value for r in log.read("t", 0, 0)] == expected
    assert [r.value for r in open_log(tmp_path).read("t", 0, 0)] == expected
    survivor.close()
    log.close()
