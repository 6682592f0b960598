"""Standby replicas of partitioned processors on the local log: placement on the owner ring, warm
takeovers with only the tail, standbys kept while the group's view cannot be read, that view
asked around rebalances only, and a new standby restored with no transaction open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from cdc.errors import UsageError
from cdc.processor import ProcessorConfig
from cdc.processor.standbys import (
    OWNERS_INTERVAL_S,
    OWNERS_SETTLING_S,
    TaskOwners,
    standby_tasks,
    wanted_standbys,
)
from cdc.processor.tasks import StateTask
from cdc.processor.tasks import open_task as real_open_task
from cdc.streams.local import LocalLog
from cdc.streams.protocol import EventStream
from tests.cdc.processor.group_members import TOPIC, member, open_group_log, run_until_idle, state
from tests.cdc.processor.test_group_crashes import produce_keyed
from tests.cdc.processor.test_processor import expected_totals, payments


@pytest.fixture
def stream(tmp_path: Path) -> Iterator[LocalLog]:
    log = open_group_log(tmp_path)
    yield log
    log.close()


def test_a_standby_takes_over_with_only_the_tail(stream: LocalLog, tmp_path: Path) -> None:
    produce_keyed(stream, TOPIC, payments(400, seed=6))
    a = member(stream, tmp_path, "a")
    b = member(stream, tmp_path, "b", standby_replicas=1)
    run_until_idle(a, b)
    owned_by_a = set(a.tasks)
    b.run(idle_timeout_s=1.2)  # standbys apply what a wrote
    tail = payments(40, seed=7)
    produce_keyed(stream, TOPIC, tail)
    run_until_idle(a)
    a.close()
    b.run(idle_timeout_s=0.6)
    taken = [e for e in b.rebalances if e.kind == "assigned" and set(e.tasks) & owned_by_a]
    assert taken, b.rebalances
    assert sum(taken[-1].restored_events.values()) <= 40  # the tail, not the whole changelog
    assert set(b.tasks) == {0, 1, 2, 3}
    assert state(b) == expected_totals(payments(400, seed=6) + tail)
    b.close()


def test_standby_placement_follows_the_owner_ring() -> None:
    owners = {0: "a", 1: "b", 2: "c", 3: "a"}
    assert standby_tasks(owners, "b", 1) == {0, 3}
    assert standby_tasks(owners, "c", 1) == {1}
    assert standby_tasks(owners, "a", 2) == {1, 2}  # after b: c, a; after c: a, b
    assert standby_tasks(owners, "b", 5) == {0, 2, 3}  # more replicas than members: all others
    assert standby_tasks({0: "a"}, "d", 1) == {0}  # a member with no task is in the ring too
    assert standby_tasks({0: "a", 1: "b"}, "c", 1) == {1}
    assert standby_tasks({1: "b"}, "a", 1, kept=[0, 1]) == {0, 1}  # task 0 in handover: kept


def test_standbys_stay_while_the_owners_cannot_be_read(tmp_path: Path) -> None:
    """The group's view is advice: a member that cannot read it (the broker away) keeps the
    standbys it has and processing goes on; the next refresh tries again."""

    class Unreachable:
        def task_owners(self, group: str, topic: str) -> dict[int, str]:
            raise UsageError(f"describing consumer group {group}: broker unreachable")

    config = ProcessorConfig("pay", (TOPIC,), store_url="memory://")
    owners = TaskOwners(cast(EventStream, Unreachable()), config, "b").now(rebalances=0)
    assert owners == {}
    assert wanted_standbys(owners, "b", 1, active=[1], kept=[0, 3]) == {0, 3}


def test_the_group_is_described_around_rebalances_and_seldom_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Standbys refresh every second; describing the group each time was a broker request per
    member per second. Tasks change only in rebalances every member takes part in."""
    clock = [1000.0]
    monkeypatch.setattr("cdc.processor.standbys.time.monotonic", lambda: clock[0])

    class Group:
        asked = 0
        reachable = True

        def task_owners(self, group: str, topic: str) -> dict[int, str]:
            self.asked += 1
            if not self.reachable:
                raise UsageError("broker unreachable")
            return {0: "a", 1: "b"}

    group = Group()
    view = TaskOwners(cast(EventStream, group), ProcessorConfig("pay", (TOPIC,)), "b")

    def refresh(seconds: float, rebalances: int = 0) -> dict[int, str]:
        clock[0] += seconds
        return view.now(rebalances)

    assert refresh(0) == {0: "a", 1: "b"} and group.asked == 1
    for _ in range(int(OWNERS_INTERVAL_S) - 1):
        assert refresh(1) == {0: "a", 1: "b"}
    assert group.asked == 1  # nothing changed: the answer is kept
    assert refresh(1) and group.asked == 2  # the backstop
    refresh(1, rebalances=1)  # a rebalance: asked at every refresh while the group settles
    for _ in range(int(OWNERS_SETTLING_S) - 1):
        refresh(1, rebalances=1)
    assert group.asked == 2 + int(OWNERS_SETTLING_S)
    refresh(2, rebalances=1)
    assert group.asked == 2 + int(OWNERS_SETTLING_S)  # settled
    group.reachable = False
    assert refresh(OWNERS_INTERVAL_S, rebalances=1) == {}  # unknown: the kept standbys stay
    group.reachable = True
    assert refresh(1, rebalances=1) == {0: "a", 1: "b"}  # a failure is retried at once


def test_standbys_spread_one_per_task_and_move_when_a_member_leaves(
    stream: LocalLog, tmp_path: Path
) -> None:
    """Three members, ``standby_replicas=1``: each task has one standby, on the member after its
    owner (never the owner); when a member leaves, a standby takes its task with the tail only
    and the standbys spread again over the two left."""
    events = payments(400, seed=21)
    produce_keyed(stream, TOPIC, events)
    members = [member(stream, tmp_path, n, standby_replicas=1) for n in ("a", "b", "c")]
    run_until_idle(*members)
    run_until_idle(*members, rounds=2)  # standbys follow the owners they now know of

    def placement() -> tuple[dict[int, str], dict[int, list[str]]]:
        owners = {p: m.member for m in members for p in m.tasks}
        standbys: dict[int, list[str]] = {}
        for m in members:
            for p in m.standbys:
                standbys.setdefault(p, []).append(m.member)
        return owners, standbys

    owners, standbys = placement()
    assert sorted(owners) == [0, 1, 2, 3]
    ring = ["a", "b", "c"]
    assert standbys == {p: [ring[(ring.index(o) + 1) % 3]] for p, o in owners.items()}
    leaving = members.pop(0)  # a: tasks 0 and 3 (task p goes to the p % n-th live member)
    warm = {m.member: set(leaving.tasks) & set(m.standbys) for m in members}
    assert warm["b"]  # b keeps the standbys of a's tasks
    leaving.close()
    run_until_idle(*members, rounds=4)
    owners, standbys = placement()
    assert sorted(owners) == [0, 1, 2, 3]
    assert standbys == {p: [("c" if o == "b" else "b")] for p, o in owners.items()}
    promoted = {p: e.restored_events[p] for m in members for e in m.rebalances
                if e.kind == "assigned" for p in e.tasks if p in warm[m.member]}  # fmt: skip
    assert promoted and set(promoted.values()) == {0}  # no input since: an empty tail
    assert state(*members) == expected_totals(events)
    for m in members:
        m.close()


def test_a_new_standby_is_restored_with_no_transaction_open(
    stream: LocalLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new standby's first restore reads its whole changelog, which can outlast the
    transaction timeout: a member with a transaction open commits it first."""
    events = payments(600, seed=31)
    produce_keyed(stream, TOPIC, events[:300])
    a = member(stream, tmp_path, "a", standby_replicas=1)
    run_until_idle(a)
    b = member(stream, tmp_path, "b")
    run_until_idle(a, b)  # b takes tasks 1 and 3 from a, which keeps them as standbys
    assert set(b.tasks) == {1, 3} == set(a.standbys)
    for partition in (1, 3):  # as if they were new: the next refresh opens them
        a.standbys.pop(partition).close()
    opened_with_txn: list[bool] = []

    def open_task(*args: Any, **kwargs: Any) -> StateTask:
        opened_with_txn.append(a._txn is not None)
        return real_open_task(*args, **kwargs)

    monkeypatch.setattr("cdc.processor.standbys.open_task", open_task)
    produce_keyed(stream, TOPIC, events[300:])
    for record in a._poll(20):  # a transaction open when the refresh opens b's tasks' standbys
        a._process(record)
    assert a._txn is not None
    a.standbys._due = 0.0
    a.run(idle_timeout_s=0.5)
    assert set(a.standbys) == {1, 3}
    assert opened_with_txn == [False, False]
    run_until_idle(a, b)
    assert state(a, b) == expected_totals(events)
    a.close()
    b.close()
