"""Partitioned processors on the local log, in one process: members share the tasks, each task's
state and changelog stay on its input partition, queries, and the errors a user meets. (Standbys
are in test_group_standbys, the kill -9 trials on Kafka and the local log in test_group_crashes.)"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.demo_workload import payment_events, reference_payments, reference_tickets, ticket_events
from cdc.errors import UsageError
from cdc.events import ChangeEvent, Op, parse_value
from cdc.examples import PAYMENTS_PER_CUSTOMER, TICKETS_SOLD, count_payment, sell_ticket
from cdc.processor import InputEvent, ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.processor.queries import MemberQueries, TaskNotHere
from cdc.state import StateTransaction
from cdc.streams.local import LocalLog
from cdc.streams.local.errors import FencedWriterError
from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import EventStream, TopicPartition, TransactionLostError
from cdc.streams.registry import open_stream
from tests.cdc.processor.group_members import TOPIC, member, open_group_log, run_until_idle, state
from tests.cdc.processor.test_group_crashes import produce_keyed
from tests.cdc.processor.test_processor import changelog_state, expected_totals, payments


@pytest.fixture
def stream(tmp_path: Path) -> Iterator[LocalLog]:
    log = open_group_log(tmp_path)
    yield log
    log.close()


def test_two_members_share_the_tasks_and_keep_state_on_the_input_partition(
    stream: LocalLog, tmp_path: Path
) -> None:
    events = payments(600, seed=11)
    produce_keyed(stream, TOPIC, events)
    a = member(stream, tmp_path, "a")
    a.run(max_events=200)
    b = member(stream, tmp_path, "b")
    run_until_idle(a, b)
    assert sorted([*a.tasks, *b.tasks]) == [0, 1, 2, 3] and a.tasks and b.tasks
    assert state(a, b) == expected_totals(events)
    assert changelog_state(stream, a.connector) == expected_totals(events)
    topic = a.connector.topics[PAYMENTS_PER_CUSTOMER.name]
    for p in range(4):
        for record in stream.read(topic, p, 0):
            change = parse_value(record.value, key=record.key)
            assert isinstance(change, ChangeEvent)
            assert getattr(change.source, "input_partition", None) == p
            assert partition_for(change.after["customer_id"].encode(), 4) == p  # type: ignore[index]
            member_name = change.transaction.id.split(":")[1]  # type: ignore[union-attr]
            assert member_name in {"a", "b"}
    # b took over tasks a had processed: their stores were restored from those partitions only
    moved = [e for e in b.rebalances if e.kind == "assigned" and e.tasks]
    assert moved and all(set(e.restored_events) == set(e.tasks) for e in moved)
    a.close()
    b.close()


def test_inputs_must_be_co_partitioned(stream: LocalLog, tmp_path: Path) -> None:
    stream.ensure_topic("other-in", 3)
    config = ProcessorConfig("pay", (TOPIC, "other-in"), store_url="memory://")
    with pytest.raises(UsageError, match="payments-in has 4, other-in has 3"):
        GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment, member="a")


def test_a_member_name_runs_once(stream: LocalLog, tmp_path: Path) -> None:
    a = member(stream, tmp_path, "a")
    with pytest.raises(UsageError, match="member a of group pay already runs"):
        member(stream, tmp_path / "other", "a")
    a.close()


def test_a_commit_of_positions_of_a_task_not_owned_is_fenced(
    stream: LocalLog, tmp_path: Path
) -> None:
    produce_keyed(stream, TOPIC, payments(40, seed=2))
    a = member(stream, tmp_path, "a")
    a.run(idle_timeout_s=0.3)
    reader = stream.group_reader([TOPIC], "pay", "zombie", lambda tps: {tp: 0 for tp in tps},
                                 lambda tps: None)  # fmt: skip
    reader.poll(10, 0.3)  # owns nothing: a holds every task lock
    writer = stream.writer("zombie-writer")
    writer.begin()
    writer.send("pay.payments_per_customer", b"k", b"v", partition=0)
    with pytest.raises(FencedWriterError, match="partition 0 to another member") as raised:
        writer.commit({TopicPartition(TOPIC, 0): 5}, reader)
    assert isinstance(raised.value, TransactionLostError)
    assert (
        stream.bounds("pay.payments_per_customer", 0).end
        == a.tasks[0].checkpoint[TopicPartition("pay.payments_per_customer", 0)]
    )
    writer.close()
    reader.close()
    a.close()


def test_queries_find_a_key_in_its_task_and_name_the_owner_when_elsewhere(
    stream: LocalLog, tmp_path: Path
) -> None:
    events = payments(300, seed=4)
    produce_keyed(stream, TOPIC, events)
    a, b = member(stream, tmp_path, "a"), member(stream, tmp_path, "b", standby_replicas=1)
    run_until_idle(a, b)
    expected = expected_totals(events)
    qa, qb = MemberQueries(a), MemberQueries(b)
    for customer, (count, total) in expected.items():
        owner, other = (qa, qb) if qa.owner_partition(customer.encode()) in a.tasks else (qb, qa)
        row = owner.get(PAYMENTS_PER_CUSTOMER, customer, input_key=customer.encode())
        assert row is not None and (row["payments"], row["total_amount"]) == (count, total)
        owner_name = (a if owner is qa else b).member
        assert other.owner(customer.encode()) == owner_name
        with pytest.raises(TaskNotHere, match=f"is not on member .*; member {owner_name} has it"):
            other.get(PAYMENTS_PER_CUSTOMER, customer, input_key=customer.encode())
        assert other.get(PAYMENTS_PER_CUSTOMER, customer) is None
    status = {(s.task, s.role): s for s in qb.status()}
    assert {t for t, role in status if role == "active"} == set(b.tasks)
    assert {t for t, role in status if role == "standby"} == set(a.tasks)
    assert all(s.lag == 0 for s in status.values())
    a.close()
    b.close()


def clear_on_reset(event: InputEvent, tx: StateTransaction) -> None:
    if isinstance(event.value, dict) and event.value.get("reset"):
        tx[PAYMENTS_PER_CUSTOMER].clear()
    else:
        count_payment(event, tx)


def test_a_truncate_clears_the_task_only_and_writes_its_deletes(
    stream: LocalLog, tmp_path: Path
) -> None:
    events = payments(200, seed=8)
    produce_keyed(stream, TOPIC, events)
    config = ProcessorConfig("pay", (TOPIC,), store_url="memory://")
    a = GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], clear_on_reset, member="a")
    a.start()
    a.run(idle_timeout_s=0.3)
    topic = a.connector.topics[PAYMENTS_PER_CUSTOMER.name]
    ends = {p: stream.bounds(topic, p).end for p in range(4)}
    reset_key = events[0]["customer_id"].encode()
    writer = stream.writer("feeder")
    writer.begin()
    writer.send(TOPIC, reset_key, json.dumps({"reset": True}).encode())
    writer.commit()
    a.run(idle_timeout_s=0.3)
    cleared = partition_for(reset_key, 4)
    for p in range(4):
        after = [parse_value(r.value, key=r.key) for r in stream.read(topic, p, ends[p])]
        changes = [c for c in after if isinstance(c, ChangeEvent)]
        if p != cleared:
            assert after == []
            continue
        assert changes and {c.op for c in changes} == {Op.DELETE}  # no t event
    expected = {k: v for k, v in expected_totals(events).items()
                if partition_for(k.encode(), 4) != cleared}  # fmt: skip
    assert state(a) == expected
    a.close()


def backend_stream(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> EventStream:
    """The session's Kafka broker or a local log under ``tmp_path``."""
    if backend == "kafka":
        return open_stream(f"kafka://{request.getfixturevalue('kafka_bootstrap')}")
    return open_stream(f"local://{tmp_path}/log")


class _ThirdCommitLost:
    """A member's writer whose third commit is lost, as a fenced one is (aborted, then
    ``TransactionLostError``); a wrapper, as the writer's class may be compiled."""

    def __init__(self, writer: Any) -> None:
        self._writer, self._commits = writer, 0

    def commit(self, *args: Any, **kwargs: Any) -> dict[TopicPartition, int]:
        self._commits += 1
        if self._commits == 3:
            self._writer.abort()
            raise TransactionLostError("injected: this member was fenced")
        return self._writer.commit(*args, **kwargs)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


@pytest.mark.parametrize("backend", ["local", "kafka"])
def test_a_lost_transaction_is_read_again_and_nothing_is_lost(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest,
    unique_name: Callable[[str], str],
) -> None:  # fmt: skip
    """A commit that fails (as a fenced one does) drops the transaction's state writes and reads
    its input again; processing goes on and the state equals the reference."""
    stream = backend_stream(backend, tmp_path, request)
    topic = unique_name("lost-in")
    stream.ensure_topic(topic, 4)
    events = payments(3_000, seed=9)
    produce_keyed(stream, topic, events)
    config = ProcessorConfig(unique_name("lost"), (topic,), store_url=f"rocksdb://{tmp_path}/st",
                             commit_max_events=200)  # fmt: skip
    a = GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment, member="a")
    a.start()
    assert a._writer is not None
    a._writer = _ThirdCommitLost(a._writer)
    report = a.run(idle_timeout_s=1.5)
    assert a.lost_transactions == 1
    assert report.events > len(events)  # the lost transaction's input was read again
    assert state(a) == expected_totals(events)
    assert changelog_state(stream, a.connector) == expected_totals(events)
    a.close()
    stream.close()


@pytest.mark.parametrize("backend", ["local", "kafka"])
def test_two_co_partitioned_inputs_go_to_one_task(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest,
    unique_name: Callable[[str], str],
) -> None:  # fmt: skip
    """The demo's two inputs (payments by customer, ticket sales by title): task p sees
    partition p of both (on Kafka through the range assignor), every state table is right."""
    stream = backend_stream(backend, tmp_path, request)
    pays, sales = unique_name("payments"), unique_name("ticket-sales")
    for topic, events, key in (
        (pays, list(payment_events(1_000, 50, 1)), "customer_id"),
        (sales, list(ticket_events(500, 1)), "title"),
    ):
        stream.ensure_topic(topic, 4)
        writer = stream.writer(f"feeder-{topic}")
        writer.begin()
        for event in events:
            writer.send(topic, event[key].encode() or None, json.dumps(event).encode())
        writer.commit()
        writer.close()

    def handler(event: InputEvent, tx: StateTransaction) -> None:
        if event.topic == sales:
            sell_ticket(event, tx)
        else:
            count_payment(event, tx)

    config = ProcessorConfig(unique_name("two"), (pays, sales), store_url="memory://",
                             session_timeout_s=2.0)  # fmt: skip
    members = [
        GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER, TICKETS_SOLD], handler, member=n)
        for n in ("a", "b")
    ]
    for m in members:
        m.start()
    run_until_idle(*members, rounds=4)
    assert sorted(p for m in members for p in m.tasks) == [0, 1, 2, 3]
    payments_seen, tickets = {}, {}
    for m in members:
        for task in m.tasks.values():
            for row in task.tables.view(PAYMENTS_PER_CUSTOMER).scan():
                payments_seen[row["customer_id"]] = (row["payments"], row["total_amount"])
            for row in task.tables.view(TICKETS_SOLD).scan():
                assert row["title"] not in tickets
                tickets[row["title"]] = (row["tickets_sold"], row["total_ticket_value"])
    assert payments_seen == reference_payments(payment_events(1_000, 50, 1))
    assert tickets == reference_tickets(ticket_events(500, 1))
    # Who has which task, as any process sees it (the consumer group, the task locks).
    owners = {p: m.member for m in members for p in m.tasks}
    outside = backend_stream(backend, tmp_path, request)
    assert outside.task_owners(config.processor_id, pays) == owners
    assert outside.task_owners(config.processor_id, sales) == owners
    assert outside.task_owners(unique_name("no-such-group"), pays) == {}
    for customer in ("c1", "c2", "c3", "c4"):
        assert (
            MemberQueries(members[0]).owner(customer.encode())
            == owners[partition_for(customer.encode(), 4)]
        )
    for m in members:
        m.close()
    # Gone at once from the local log; on Kafka a static member keeps its partitions in the
    # group until its session times out (a restart within it gets them back).
    deadline = time.monotonic() + 30
    while outside.task_owners(config.processor_id, pays) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert outside.task_owners(config.processor_id, pays) == {}
    outside.close()
    stream.close()
