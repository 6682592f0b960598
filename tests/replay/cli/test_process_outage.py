"""``replicator process`` stops when its input has been idle; a broker that went down mid-run
starves it the same way, and must not pass for the end of the input (exit 0): the command
checks the stream after the idle stop and names the outage in one line (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc.demo_workload import PAYMENTS_TOPIC, payment_events, produce
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.kafka_stream import KafkaEventStream
from tests.replay.cli.test_user_errors import ROOT

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("member", [None, "m0"], ids=["single", "member"])
def test_a_broker_gone_while_idle_is_named_not_taken_for_the_end(
    tmp_path: Path, member: str | None
) -> None:
    broker = LocalKafkaBroker(tmp_path / "broker", heap="512m")
    broker.start()
    try:
        stream = KafkaEventStream(broker.bootstrap_servers)
        stream.ensure_topic(PAYMENTS_TOPIC, 2)
        produce(stream, PAYMENTS_TOPIC, payment_events(200, 20, seed=1), key="customer_id")
        ends = {p: stream.bounds(PAYMENTS_TOPIC, p).end for p in range(2)}
        errors = tmp_path / "process.err"
        processor = subprocess.Popen(
            [sys.executable, "-m", "replay.cli.main", "process", "--example", "payments",
             "--stream", f"kafka://{broker.bootstrap_servers}", "--store", "memory://",
             "--idle-timeout", "8", *(["--member", member] if member else [])],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
            stderr=errors.open("w"), text=True, cwd=tmp_path,
        )  # fmt: skip
        assert processor.stdout is not None
        started = json.loads(processor.stdout.readline())
        assert started["event"] == "started", errors.read_text()
        # Everything processed and committed (with the group's positions): the processor now
        # waits for input, and the broker goes down under it.
        deadline = time.monotonic() + 60
        # (The input's end is one past the position: the feeder's commit marker.)
        while not _caught_up(stream.committed_positions("demo", PAYMENTS_TOPIC), ends):
            assert time.monotonic() < deadline and processor.poll() is None, errors.read_text()
            time.sleep(0.2)
        stream.close()
        broker.stop()
        stopped = time.monotonic()
        out, _ = processor.communicate(timeout=120)
    finally:
        broker.stop()
    stderr = errors.read_text()
    assert processor.returncode == 2, stderr
    assert '"event": "done"' not in out
    lines = [line for line in stderr.splitlines() if line.startswith("replicator process: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "no input for 8 s after 200 events, and the stream is unreachable" in lines[0], lines
    assert "is the broker running" in lines[0]
    assert time.monotonic() - stopped < 90


def _caught_up(committed: dict[int, int], ends: dict[int, int]) -> bool:
    return all(committed.get(p, -1) >= end - 1 for p, end in ends.items())
