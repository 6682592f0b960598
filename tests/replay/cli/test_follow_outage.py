"""``replicator replay --follow`` rides out a broker outage: the broker (a dedicated one, not the
session's) stops while the follower is live; the rounds fail with one line on stderr each and are
retried; once the broker is back, the changes written after the restart reach the table and the
follower is still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.kafka_stream import KafkaEventStream
from projections.change_ops import RowChange
from replay.sinks import duckdb_files
from tests.replay.cli.test_live_duckdb_readers import ledger_position, sale_row
from tests.replay.cli.test_user_errors import ROOT
from tests.replay.projection.workload import SalesTopic

pytestmark = pytest.mark.integration

TABLE = "movie_ticket_sales"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalKafkaBroker]:
    found = LocalKafkaBroker(tmp_path / "broker", heap="512m")
    found.start()
    yield found
    found.stop()


def _wait_for(done: Any, follower: subprocess.Popen[str], errors: Path, what: str) -> None:
    deadline = time.monotonic() + 180
    while not done():
        if follower.poll() is not None:
            raise AssertionError(f"the follower exited: {errors.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {errors.read_text()[-2000:]}")
        time.sleep(0.2)


def test_follow_retries_while_the_broker_is_down_and_goes_on_after(
    broker: LocalKafkaBroker, tmp_path: Path
) -> None:
    stream = KafkaEventStream(broker.bootstrap_servers)
    topic = SalesTopic(stream, partitions=1)
    topic.write(RowChange("c", None, sale_row(i, 1)) for i in range(50))
    db, errors = tmp_path / "live.duckdb", tmp_path / "follower.err"
    follower = subprocess.Popen(
        [sys.executable, "-m", "replay.cli.main", "replay", "--follow", "--poll", "0.2",
         "--stream", f"kafka://{broker.bootstrap_servers}", "--sink", f"duckdb://{db}",
         "--topics", topic.topic],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
        stderr=errors.open("w"), text=True,
    )  # fmt: skip
    try:
        first = stream.bounds(topic.topic, 0).end
        _wait_for(lambda: ledger_position(db) == first, follower, errors, "the first replay")
        broker.stop()
        _wait_for(lambda: "retrying in" in errors.read_text(), follower, errors, "a failed round")
        broker.start()
        topic.write(RowChange("u", None, sale_row(i, 2)) for i in range(0, 50, 3))
        topic.write([RowChange("c", None, sale_row(50, 1))])
        final = stream.bounds(topic.topic, 0).end
        after = "the changes after the restart"
        _wait_for(lambda: ledger_position(db) == final, follower, errors, after)
        assert follower.poll() is None, "the follower stopped"
    finally:
        follower.send_signal(signal.SIGINT)
        try:
            follower.wait(timeout=60)
        except subprocess.TimeoutExpired:
            follower.kill()
        stream.close()
    failures = [line for line in errors.read_text().splitlines() if "round failed:" in line]
    assert failures and all(line.startswith("replicator: round failed: ") for line in failures)
    rows = duckdb_files.query(db, f"SELECT id, seats FROM {TABLE} ORDER BY id")[1]
    assert rows == [(i, 2 if i % 3 == 0 and i < 50 else 1) for i in range(51)]
