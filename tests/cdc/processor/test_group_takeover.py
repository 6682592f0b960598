"""Takeovers on Kafka that outlast a transaction's timeout: a member handed a task while it has a
transaction open must not restore the task inside that transaction. A restore longer than the
transaction timeout lets the broker abort the transaction and fence the member's producer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.streams.protocol import StreamRecord
from cdc.streams.registry import open_stream
from tests.cdc.processor.group_members import run_until_idle, state
from tests.cdc.processor.test_group_crashes import produce_keyed
from tests.cdc.processor.test_processor import changelog_state, expected_totals, payments

TRANSACTION_TIMEOUT_S = 1.0
RESTORE_PAUSE_S = 3.0
"""Per restore window of the takeover: past the transaction timeout and the broker's check of
timed-out transactions (every second on the test broker)."""


def test_a_restore_longer_than_the_transaction_timeout_does_not_fence_the_member(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    """Member a processes input (a transaction open) when the group hands it the tasks of a
    member that left; their restore takes longer than the transaction timeout. The open
    transaction is given up before the restore and its input read again: a goes on, and its
    state and changelog equal the reference."""
    stream = open_stream(f"kafka://{kafka_bootstrap}")
    topic = unique_name("takeover-in")
    stream.ensure_topic(topic, 4)
    events = payments(12_000, seed=21)
    produce_keyed(stream, topic, events[:2_000])
    config = ProcessorConfig(
        unique_name("takeover"), (topic,), store_url=f"rocksdb://{tmp_path}/st",
        session_timeout_s=2.0, transaction_timeout_s=TRANSACTION_TIMEOUT_S,
    )  # fmt: skip
    slow_restores = threading.Event()

    def restoring(done: int, total: int) -> None:
        if slow_restores.is_set():
            time.sleep(RESTORE_PAUSE_S)

    a = GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment, member="a",
                       progress=restoring)  # fmt: skip
    b = GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment, member="b")
    a.start()
    b.start()
    run_until_idle(a, b, rounds=4)
    assert a.tasks and b.tasks and sorted([*a.tasks, *b.tasks]) == [0, 1, 2, 3]
    moving = set(b.tasks)
    b.close()  # a static member: its tasks move once its session times out
    produce_keyed(stream, topic, events[2_000:])
    slow_restores.set()
    # a works slowly through its input (more than it can finish before the takeover), committing
    # every 0.4 s between a poll and the processing of its records: every poll after the first
    # record sees a transaction open, so the takeover always finds one to give up.
    deadline, opened = time.monotonic() + 60, time.monotonic()
    while len(a.tasks) < 4 and time.monotonic() < deadline:
        records = a._poll(10)
        if records and a._txn is not None and time.monotonic() - opened > 0.4:
            a._commit()
        for record in records:
            if a._txn is None:
                opened = time.monotonic()
            a._process(record)
        time.sleep(0.02)
    slow_restores.clear()
    takeover = [e for e in a.rebalances if e.kind == "assigned" and set(e.tasks) == moving]
    assert takeover and takeover[-1].seconds > RESTORE_PAUSE_S > TRANSACTION_TIMEOUT_S
    assert a.lost_transactions >= 1  # the transaction open at the takeover, given up
    a.run(idle_timeout_s=2.0)
    assert state(a) == expected_totals(events)
    assert changelog_state(stream, a.connector) == expected_totals(events)
    a.close()
    stream.close()


def test_a_transaction_begun_after_one_was_given_up_is_given_up_with_it(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    """Records of a poll processed after the open transaction was given up for a restore begin
    another transaction; the rewind before the next poll aborts that one too (its producer
    would refuse to begin a third), and the member goes on from its committed input."""
    stream = open_stream(f"kafka://{kafka_bootstrap}")
    topic = unique_name("given-up-in")
    stream.ensure_topic(topic, 2)
    events = payments(600, seed=5)
    produce_keyed(stream, topic, events[:300])
    config = ProcessorConfig(unique_name("given-up"), (topic,),
                             store_url=f"rocksdb://{tmp_path}/st")  # fmt: skip
    a = GroupProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment, member="a")
    a.start()
    a.run(idle_timeout_s=1.0)
    produce_keyed(stream, topic, events[300:])
    records: list[StreamRecord] = []
    deadline = time.monotonic() + 30
    while len(records) < 20 and time.monotonic() < deadline:
        records += a._poll(20)
    assert len(records) >= 20
    a._process(records[0])
    a._give_up_transaction()  # as a takeover does, from inside a poll (or a commit's)
    for record in records[1:]:
        a._process(record)
    assert a._txn is not None  # begun after the give-up
    a.run(idle_timeout_s=2.0)
    assert a.lost_transactions == 1
    assert state(a) == expected_totals(events)
    assert changelog_state(stream, a.connector) == expected_totals(events)
    a.close()
    stream.close()
