"""DuckDB writes are atomic: SIGKILL in the middle of big merges never splits data from ledger."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from replay.sinks.duckdb_store import DuckDBStore
from tests.conftest import REPO_ROOT
from tests.replay.sinks.duckdb_crash_worker import SPEC, TP

pytestmark = pytest.mark.slow
KEYS = 400_000
TRIALS = 6


class _Worker:
    """The crash worker subprocess, its output lines collected by a thread."""

    def __init__(self, db: Path, parquet: Path) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.replay.sinks.duckdb_crash_worker", str(db), str(parquet)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait_for(self, prefix: str, count: int, timeout_s: float = 300) -> float:
        """Wait until ``count`` lines start with ``prefix``; the time it took."""
        start = time.monotonic()
        while sum(line.startswith(prefix) for line in self.lines) < count:
            assert self.proc.poll() is None, f"worker exited: {self.lines[-3:]}"
            assert time.monotonic() - start < timeout_s, f"no {prefix} after {timeout_s}s"
            time.sleep(0.01)
        return time.monotonic() - start

    def kill(self) -> tuple[int, int]:
        """SIGKILL; the last merge begun and the last committed (-1: none) it reported."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        time.sleep(0.1)
        last = {
            p: max((int(x.split()[1]) for x in self.lines if x.startswith(p)), default=-1)
            for p in ("begin", "commit")
        }
        return last["begin"], last["commit"]


def _violations(db: Path, applied: int) -> list[str]:
    """How the reopened table differs from the state right after merge ``applied``."""
    with duckdb.connect(str(db)) as conn:
        rows, stale, undeleted, other_pos = conn.execute(
            "SELECT count(*), count(*) FILTER (v <> $1), count(*) FILTER (id % 10 = $1 % 10),"
            " count(*) FILTER (__pos <> lpad(CAST($1 AS VARCHAR), 10, '0')) FROM big",
            [applied],
        ).fetchone() or (0, 0, 0, 0)
    problems = [] if rows == KEYS - KEYS // 10 else [f"{rows} rows, not {KEYS - KEYS // 10}"]
    for count, what in (
        (stale, "of another merge"),
        (undeleted, "not deleted"),
        (other_pos, "with another __pos"),
    ):
        problems += [f"{count} rows {what}"] if count else []
    return problems


def test_sigkill_mid_merge_leaves_data_and_ledger_at_one_commit(tmp_path: Path) -> None:
    db, parquet = tmp_path / "crash.duckdb", tmp_path / "keys.parquet"
    with duckdb.connect() as conn:
        conn.execute(
            f"COPY (SELECT range AS id, repeat('x', 32) AS pad FROM range({KEYS}))"
            f" TO '{parquet}' (FORMAT parquet)"
        )
    rng, mid_merge, merge_s = random.Random(11), 0, 0.0
    for trial in range(TRIALS):
        worker = _Worker(db, parquet)
        worker.wait_for("commit", 1)
        if trial == 0:  # time one merge of an existing table, to spread the kills over it
            merge_s = worker.wait_for("commit", 2)
        time.sleep(rng.uniform(0, 1.2 * merge_s))
        begun, committed = worker.kill()
        mid_merge += begun > committed

        with duckdb.connect(str(db)) as conn:
            history = DuckDBStore(conn).history(SPEC.name)
        applied = history[-1].positions[TP] - 1
        assert committed <= applied <= begun, f"trial {trial}: ledger at {applied}"
        assert _violations(db, applied) == [], f"trial {trial}: ledger says merge {applied}"
    assert mid_merge >= TRIALS // 2, "too few kills landed inside a merge"
