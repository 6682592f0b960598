"""``replicator process`` stops when its input has been idle; a broker that went down mid-run
starves it the same way, and must not pass for the end of the input (exit 0): the command
checks the stream after the idle stop and names the outage in one line (exit 2). A single
processor and a member of a partitioned one run side by side on one dedicated broker."""

from __future__ import annotations

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
RUNS = {"solo": [], "grouped": ["--member", "m0"]}
"""Processor id -> extra arguments (each its own consumer group and changelog topics)."""


def test_a_broker_gone_while_idle_is_named_not_taken_for_the_end(tmp_path: Path) -> None:
    broker = LocalKafkaBroker(tmp_path / "broker", heap="512m")
    broker.start()
    processes: dict[str, subprocess.Popen[str]] = {}
    try:
        stream = KafkaEventStream(broker.bootstrap_servers)
        stream.ensure_topic(PAYMENTS_TOPIC, 2)
        produce(stream, PAYMENTS_TOPIC, payment_events(200, 20, seed=1), key="customer_id")
        ends = {p: stream.bounds(PAYMENTS_TOPIC, p).end for p in range(2)}
        for name, extra in RUNS.items():
            processes[name] = subprocess.Popen(
                [sys.executable, "-m", "replay.cli.main", "process", "--example", "payments",
                 "--stream", f"kafka://{broker.bootstrap_servers}", "--store", "memory://",
                 "--id", name, "--idle-timeout", "8", *extra],
                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                stderr=(tmp_path / f"{name}.err").open("w"), text=True, cwd=tmp_path,
            )  # fmt: skip
        # Everything processed and committed (with the groups' positions): the processors now
        # wait for input, and the broker goes down under them. (The input's end is one past
        # the position: the feeder's commit marker.)
        deadline = time.monotonic() + 90
        for name, process in processes.items():
            while not _caught_up(stream.committed_positions(name, PAYMENTS_TOPIC), ends):
                errors = (tmp_path / f"{name}.err").read_text()
                assert time.monotonic() < deadline and process.poll() is None, errors
                time.sleep(0.2)
        stream.close()
        broker.stop()
        stopped = time.monotonic()
        outputs = {name: process.communicate(timeout=120)[0] for name, process in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
        broker.stop()
    for name, process in processes.items():
        stderr = (tmp_path / f"{name}.err").read_text()
        assert process.returncode == 2, stderr
        assert '"event": "done"' not in outputs[name]
        lines = [line for line in stderr.splitlines() if line.startswith("replicator process: ")]
        assert len(lines) == 1 and "Traceback" not in stderr, stderr
        assert "no input for 8 s after 200 events, and the stream is unreachable" in lines[0]
        assert "is the broker running" in lines[0]
    assert time.monotonic() - stopped < 90


def _caught_up(committed: dict[int, int], ends: dict[int, int]) -> bool:
    return all(committed.get(p, -1) >= end - 1 for p, end in ends.items())
