"""A DuckDB read model is readable from other processes while ``replicator replay --follow``
keeps it live, and every read sees one committed state.

Three processes: this test feeds a change topic (small transactions, one after another), the
follower (``replicator replay --follow``, a subprocess with its own Spark) applies them to a
DuckDB file, and a reader (the README's recipe, ``docs/examples/live_duckdb_reader.py``: nothing
but ``duckdb``, as a BI tool or notebook would, retrying while the writer holds the file) reads
the table and its ledger over and over.
Each read must equal the reference state at the offset its ledger row says, and the reader must
have seen the table grow while it was kept live, not just its final state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from projections.change_ops import RowChange
from replay.sinks import duckdb_files
from tests.replay.cli.test_user_errors import ROOT, replicator
from tests.replay.projection.workload import SalesTopic

pytestmark = pytest.mark.integration

READER = ROOT / "docs" / "examples" / "live_duckdb_reader.py"  # the README's recipe


def sale_row(i: int, seats: int) -> dict[str, Any]:
    """Row ``i`` of the ticket-sales table with ``seats`` (titles cycle over seven)."""
    return {"id": i, "title": f"t{i % 7}", "region": "eu", "total_ticket_value": None,
            "seats": seats, "refunded": False}  # fmt: skip


def _snapshot(topic: SalesTopic) -> list[list[Any]]:
    columns = ("id", "title", "region", "total_ticket_value", "seats", "refunded")
    return sorted([r[c] for c in columns] for r in topic.rows.values())


def test_readers_query_the_live_table_while_follow_keeps_it(tmp_path: Path) -> None:
    log = LocalLog(str(tmp_path / "log"))
    topic = SalesTopic(log, partitions=1)
    topic.write(RowChange("c", None, sale_row(i, 1)) for i in range(100))
    references = {log.bounds(topic.topic, 0).end: _snapshot(topic)}
    db, reads, stop = tmp_path / "live.duckdb", tmp_path / "reads.jsonl", tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    follower = subprocess.Popen(
        [sys.executable, "-m", "replay.cli.main", "replay", "--follow",
         "--stream", f"local://{tmp_path}/log", "--sink", f"duckdb://{db}",
         "--topics", topic.topic],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    reader = subprocess.Popen(
        [sys.executable, str(READER), str(db), "movie_ticket_sales", "--rows", "--every", "0.05",
         "--stop-file", str(stop)],
        stdout=reads.open("w"),
    )  # fmt: skip
    try:
        _wait_for(lambda: ledger_position(db) is not None, follower, "the first replay")
        for step in range(60):  # a transaction every 0.1 s for about 6 s
            topic.write(RowChange("u", None, sale_row(i, 2 + step)) for i in range(step, 100, 9))
            references[log.bounds(topic.topic, 0).end] = _snapshot(topic)
            if step % 10 == 0:  # a second transaction: the follower may stop between the two
                topic.write([RowChange("c", None, sale_row(100 + step, 1))])
                references[log.bounds(topic.topic, 0).end] = _snapshot(topic)
            time.sleep(0.1)
        final = log.bounds(topic.topic, 0).end
        _wait_for(lambda: ledger_position(db) == final, follower, "the follower to catch up")
    finally:
        stop.touch()
        reader.wait(timeout=60)
        follower.send_signal(signal.SIGINT)
        try:
            follower.wait(timeout=60)
        except subprocess.TimeoutExpired:
            follower.kill()
    assert reader.returncode == 0
    seen = [json.loads(line) for line in reads.read_text().splitlines()]
    live = [(r["positions"][f"{topic.topic}:0"], r["rows"]) for r in seen if r["positions"]]
    for offset, rows in live:  # one committed state per read: rows and ledger agree
        assert rows == references[offset], f"read at offset {offset}"
    assert len({offset for offset, _ in live}) >= 2, "the reader never saw the table move"
    waits = sorted(r["waited"] for r in seen)
    print(f"{len(seen)} reads, {len({offset for offset, _ in live})} states seen, wait p50 "
          f"{waits[len(waits) // 2] * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms")  # fmt: skip
    done = replicator("query", f"duckdb://{db}", "SELECT count(*) AS n FROM movie_ticket_sales",
                      "--format", "csv", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", str(len(references[final]))]


def ledger_position(db: Path, table: str = "movie_ticket_sales") -> int | None:
    """The table's newest ledger position (highest over partitions), None before the first
    write (the ledger table is created with it)."""
    if not db.exists():
        return None
    sql = ("SELECT max(next_offset) FROM _replicator_ledger WHERE table_name = ? AND version = "
           "(SELECT max(version) FROM _replicator_ledger WHERE table_name = ?)")  # fmt: skip
    try:
        rows = duckdb_files.query(db, sql, [table] * 2)[1]
    except duckdb_files.QUERY_ERRORS:
        return None
    return None if rows[0][0] is None else int(rows[0][0])


def _wait_for(done: Any, follower: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 180
    while not done():
        if follower.poll() is not None:
            raise AssertionError(f"the follower exited: {follower.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
