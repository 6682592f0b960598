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
from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.streams.local import LocalLog
from cdc.streams.partitioner import partition_for
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


def test_owners_names_the_member_of_each_task_and_of_a_key(tmp_path: Path) -> None:
    """``replicator owners`` from another process: the tasks of two running members, the member
    to ask for a key, and a one-line error for a topic that is not there."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    log.ensure_topic(PAYMENTS_TOPIC, 4)
    produce(log, PAYMENTS_TOPIC, payment_events(400, 20, seed=5), key="customer_id")
    config = ProcessorConfig("pay", (PAYMENTS_TOPIC,), store_url="memory://")
    members = [
        GroupProcessor(config, log, [PAYMENTS_PER_CUSTOMER], count_payment, member=name)
        for name in ("m-a", "m-b")
    ]
    for m in members:
        m.start()
    for _ in range(3):
        for m in members:
            m.run(idle_timeout_s=0.3)
    owners = {str(p): m.member for m in members for p in m.tasks}
    assert len(owners) == 4
    stream = ["--stream", f"local://{tmp_path}/log", "--id", "pay", "--input", PAYMENTS_TOPIC]
    listed = replicator("owners", *stream, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"processor": "pay", "tasks": owners}
    one = replicator("owners", *stream, "--key", "c7", cwd=tmp_path)
    task = partition_for(b"c7", 4)
    assert json.loads(one.stdout) == {"key": "c7", "task": task, "member": owners[str(task)]}
    for m in members:
        m.close()
    gone = replicator("owners", *stream, "--key", "c7", cwd=tmp_path)
    assert gone.returncode == 1 and json.loads(gone.stdout)["member"] is None
    missing = replicator("owners", *stream[:4], "--input", "no-such-topic", cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "no input topic no-such-topic" in missing.stderr
    log.close()
