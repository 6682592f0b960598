"""``replicator process --instances N`` / ``--member``: a partitioned processor from the command
line, as a user runs it (subprocesses), on the local log."""

from __future__ import annotations

import json
from pathlib import Path

from cdc.connector.changelog import ChangelogConnector
from cdc.demo_workload import (
    PAYMENTS_TOPIC,
    TICKET_SALES_TOPIC,
    payment_events,
    produce,
    reference_payments,
)
from cdc.examples import PAYMENTS_PER_CUSTOMER
from cdc.streams.local import LocalLog
from tests.cdc.processor.test_processor import changelog_state
from tests.replay.cli.test_user_errors import replicator


def test_two_instances_process_every_partition_once(tmp_path: Path) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    log.ensure_topic(PAYMENTS_TOPIC, 4)
    produce(log, PAYMENTS_TOPIC, payment_events(3_000, 200, seed=3), key="customer_id")
    done = replicator(
        "process", "--stream", f"local://{tmp_path}/log", "--store", f"rocksdb://{tmp_path}/st",
        "--id", "pay", "--example", "payments", "--instances", "2", "--idle-timeout", "1.5",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    finished = {line["member"]: line for line in lines if line["event"] == "done"}
    assert set(finished) == {"pay-0", "pay-1"}
    assert sum(line["events"] for line in finished.values()) >= 3_000
    assert any(line["event"] == "assigned" and line["tasks"] for line in lines)
    connector = ChangelogConnector("pay", [PAYMENTS_PER_CUSTOMER], partitions=4)
    assert changelog_state(log, connector) == reference_payments(payment_events(3_000, 200, 3))
    log.close()


def test_inputs_with_different_partition_counts_are_one_line(tmp_path: Path) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    log.ensure_topic(PAYMENTS_TOPIC, 4)
    log.ensure_topic(TICKET_SALES_TOPIC, 2)
    log.close()
    done = replicator(
        "process", "--stream", f"local://{tmp_path}/log", "--store", "memory://",
        "--example", "demo", "--member", "m0", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "not co-partitioned (payments has 4, movie_ticket_sales has 2" in done.stderr
