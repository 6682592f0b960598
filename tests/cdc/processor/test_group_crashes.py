"""Exactly-once across members of a partitioned processor under kill -9: members are killed at
random points (while processing, restoring or rebalancing), restarted at once or left down so
their tasks move to the others, paused past the session timeout (zombies, Kafka only), and
their stores deleted; the final state tables and the committed changelog equal a reference
computed from the input alone."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.connector.changelog import ChangelogConnector
from cdc.events import ChangeEvent, TransactionEvent, parse_value
from cdc.examples import PAYMENTS_PER_CUSTOMER
from cdc.state import CorruptStateStoreError, open_state_store
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream
from tests.cdc.processor.group_worker import SESSION_TIMEOUT_S
from tests.cdc.processor.test_processor import changelog_state, expected_totals, payments
from tests.cdc.processor.test_processor_crashes import store_state

REPO = Path(__file__).resolve().parents[3]
PARTITIONS = 4
CHUNK = 300


class Members:
    """The member processes of one processor: spawn, kill -9, pause, finish."""

    def __init__(self, stream_url: str, store_root: Path, processor_id: str, topic: str) -> None:
        self.args = [stream_url, str(store_root), processor_id, topic]
        self.store_root = store_root
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.lost_transactions = 0

    def spawn(self, member: str, idle_s: float = 60, standbys: int = 0, want: int = 0) -> None:
        self.running[member] = subprocess.Popen(
            [sys.executable, "-m", "tests.cdc.processor.group_worker", *self.args, member,
             str(idle_s), str(standbys), str(want)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def kill(self, member: str) -> None:
        worker = self.running.pop(member)
        worker.kill()  # SIGKILL: no cleanup of any kind
        _, err = worker.communicate()
        self.lost_transactions += err.decode(errors="replace").count("transaction lost")

    def finish(self, member: str) -> dict[str, object]:
        worker = self.running.pop(member)
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err.decode()[-3000:]
        done: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
        return done


def produce_keyed(stream: EventStream, topic: str, values: list[dict[str, str]]) -> None:
    """Append payments to ``topic`` keyed by customer, in one transaction."""
    writer = stream.writer(f"feeder-{topic}")
    writer.begin()
    for value in values:  # keyed by the state key: each customer's payments go to one task
        writer.send(topic, value["customer_id"].encode(), json.dumps(value).encode())
    writer.commit()
    writer.close()


def _check_stores_not_ahead(stream: EventStream, member_dir: Path) -> None:
    for task_dir in member_dir.glob("task-*"):
        try:
            store = open_state_store(f"rocksdb://{task_dir}")
        except CorruptStateStoreError:
            continue  # killed while creating the store: rebuilt when the task opens
        try:
            for tp, position in store.checkpoint().items():
                assert tp.partition == int(task_dir.name.split("-")[1]), (task_dir, tp)
                assert position <= stream.bounds(tp.topic, tp.partition).end, (tp, position)
        finally:
            store.close()


def run_group_trials(
    stream_url: str, tmp_path: Path, name: Callable[[str], str], *,
    members: list[str], kills: int, standbys: int, pauses: bool, seed: int,
) -> None:  # fmt: skip
    rng = random.Random(seed)
    stream = open_stream(stream_url)
    topic, processor_id = name("pay-in"), name("group")
    stream.ensure_topic(topic, PARTITIONS)
    group = Members(stream_url, tmp_path / "stores", processor_id, topic)
    produced: list[dict[str, str]] = []
    for member in members:
        group.spawn(member, standbys=standbys)
    paused = 0
    for trial in range(kills):
        chunk = payments(CHUNK, seed=seed + trial)
        produce_keyed(stream, topic, chunk)
        produced += chunk
        for member in members:
            if member not in group.running:
                group.spawn(member, standbys=standbys)
        time.sleep(rng.uniform(0.05, 1.5))
        victim = rng.choice(members)
        if pauses and trial % 4 == 2:  # a zombie: paused past its session, then resumed
            worker = group.running[victim]
            worker.send_signal(signal.SIGSTOP)
            time.sleep(SESSION_TIMEOUT_S + rng.uniform(0.5, 2.0))
            worker.send_signal(signal.SIGCONT)
            paused += 1
            time.sleep(rng.uniform(0.0, 1.0))
        group.kill(victim)
        _check_stores_not_ahead(stream, group.store_root / victim)
        if trial % 5 == 3:
            shutil.rmtree(group.store_root / victim, ignore_errors=True)
        if rng.random() < 0.5:
            group.spawn(victim, standbys=standbys)  # else its tasks move to the others
    for member in members:
        if member not in group.running:
            group.spawn(member, standbys=standbys)
    for member in members:
        group.kill(member)
    # One member finishes alone: it ends up owning every task, so its stores hold everything.
    last = members[0]
    group.spawn(last, idle_s=2.0, standbys=standbys, want=PARTITIONS)
    done = group.finish(last)
    assert done["tasks"] == list(range(PARTITIONS)), done

    reference = expected_totals(produced)
    state: dict[str, tuple[int, Decimal]] = {}
    for p in range(PARTITIONS):
        task = store_state(group.store_root / last / f"task-{p}")
        assert not set(task) & set(state), "a key in two tasks"
        state.update(task)
    assert state == reference
    connector = ChangelogConnector(processor_id, [PAYMENTS_PER_CUSTOMER], partitions=PARTITIONS)
    assert changelog_state(stream, connector) == reference
    # No duplicated effect: exactly one committed change event per input event, each in the
    # changelog partition of the input partition it came from.
    changelog = connector.topics[PAYMENTS_PER_CUSTOMER.name]
    count = 0
    for p in range(PARTITIONS):
        for record in stream.read(changelog, p, 0):
            change = parse_value(record.value, key=record.key)
            assert isinstance(change, ChangeEvent)
            assert getattr(change.source, "input_partition", None) == p
            count += 1
    assert count == len(produced)
    ends = [
        e for r in stream.read(connector.transaction_topic, 0, 0)
        if isinstance(e := parse_value(r.value), TransactionEvent) and e.status == "END"
    ]  # fmt: skip
    assert sum(e.event_count or 0 for e in ends) == len(produced)
    assert not pauses or paused > 0
    print(f"{kills} kills, {paused} pauses, {group.lost_transactions} transactions lost")
    stream.close()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("members", "standbys", "seed"),
    [(["m0", "m1"], 0, 1), (["m0", "m1", "m2"], 1, 2)],
    ids=["2-members", "3-members-standbys"],
)
def test_kill_9_members_on_kafka(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str],
    members: list[str], standbys: int, seed: int,
) -> None:  # fmt: skip
    run_group_trials(
        f"kafka://{kafka_bootstrap}", tmp_path, unique_name,
        members=members, kills=8, standbys=standbys, pauses=True, seed=seed,
    )  # fmt: skip


def test_kill_9_members_on_the_local_log(tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    run_group_trials(
        f"local://{tmp_path}/log", tmp_path, unique_name,
        members=["m0", "m1", "m2"], kills=6, standbys=1, pauses=False, seed=3,
    )  # fmt: skip
