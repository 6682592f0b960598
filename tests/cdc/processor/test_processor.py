"""The event processor on the local log: counting, changelog capture, dead letters, restore."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.connector.changelog import ChangelogConnector
from cdc.events import ChangeEvent, Op, TransactionEvent, parse_value
from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, ProcessorConfig
from cdc.streams.local import LocalLog
from cdc.streams.protocol import EventStream


def payments(count: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [
        {"customer_id": f"c{rng.randrange(40)}", "amount": f"{rng.randrange(1, 100000) / 100:.2f}"}
        for _ in range(count)
    ]


def expected_totals(events: list[dict[str, str]]) -> dict[str, tuple[int, Decimal]]:
    out: dict[str, tuple[int, Decimal]] = {}
    for p in events:
        n, total = out.get(p["customer_id"], (0, Decimal("0.00")))
        out[p["customer_id"]] = (n + 1, total + Decimal(p["amount"]))
    return out


def produce(stream: EventStream, topic: str, values: list[bytes]) -> None:
    writer = stream.writer(f"feeder-{topic}")
    writer.begin()
    for i, value in enumerate(values):
        writer.send(topic, f"k{i % 7}".encode(), value)
    writer.commit()
    writer.close()


@pytest.fixture
def stream(tmp_path: Path) -> Iterator[LocalLog]:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    yield log
    log.close()


def make_processor(stream: EventStream, store_url: str) -> EventProcessor:
    config = ProcessorConfig(
        "payments", ("payments-in",), store_url=store_url, commit_max_events=50
    )
    return EventProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment)


def state_of(processor: EventProcessor) -> dict[str, tuple[int, Decimal]]:
    assert processor.tables is not None
    return {
        r["customer_id"]: (r["payments"], r["total_amount"])
        for r in processor.tables.view(PAYMENTS_PER_CUSTOMER).scan()
    }


def changelog_state(
    stream: EventStream, connector: ChangelogConnector
) -> dict[str, tuple[int, Decimal]]:
    topic = connector.topics[PAYMENTS_PER_CUSTOMER.name]
    rows: dict[str, tuple[int, Decimal]] = {}
    for p in range(stream.partition_count(topic)):
        for record in stream.read(topic, p, 0):
            change = connector.decode(record)
            if change is not None and change.after is not None:
                a = change.after
                rows[a["customer_id"]] = (a["payments"], a["total_amount"])
    return rows


def test_counts_payments_and_captures_every_write(stream: LocalLog, tmp_path: Path) -> None:
    stream.ensure_topic("payments-in", 2)
    events = payments(400, seed=1)
    produce(stream, "payments-in", [json.dumps(e).encode() for e in events])
    processor = make_processor(stream, f"rocksdb://{tmp_path}/store")
    processor.start()
    report = processor.run(idle_timeout_s=0.5)
    assert report.events == 400 and report.dead_lettered == 0
    assert state_of(processor) == expected_totals(events)
    assert changelog_state(stream, processor.connector) == expected_totals(events)

    topic = processor.connector.topics[PAYMENTS_PER_CUSTOMER.name]
    changes = [parse_value(r.value, key=r.key) for p in (0, 1) for r in stream.read(topic, p, 0)]
    assert all(isinstance(c, ChangeEvent) for c in changes)
    assert len(changes) == 400  # one change event per counted payment
    assert {c.op for c in changes if isinstance(c, ChangeEvent)} == {Op.CREATE, Op.UPDATE}
    # BEGIN/END bracket every commit and count its events per data collection.
    meta = [parse_value(r.value) for r in stream.read(processor.connector.transaction_topic, 0, 0)]
    assert all(isinstance(m, TransactionEvent) for m in meta)
    ends = [m for m in meta if isinstance(m, TransactionEvent) and m.status == "END"]
    assert len(ends) * 2 == len(meta) and sum(e.event_count or 0 for e in ends) == 400
    processor.close()


def test_malformed_events_are_dead_lettered_without_state_writes(
    stream: LocalLog, tmp_path: Path
) -> None:
    stream.ensure_topic("payments-in", 1)
    good = payments(20, seed=2)
    values = [json.dumps(e).encode() for e in good]
    values.insert(5, b"{not json")
    values.insert(9, json.dumps({"customer_id": "c1", "amount": "-3"}).encode())
    values.insert(12, json.dumps({"amount": "3"}).encode())
    produce(stream, "payments-in", values)
    processor = make_processor(stream, "memory://")
    processor.start()
    report = processor.run(idle_timeout_s=0.5)
    assert report.dead_lettered == 3
    assert state_of(processor) == expected_totals(good)
    dead = list(stream.read("payments.dead-letter", 0, 0))
    assert [r.value for r in dead] == [values[5], values[9], values[12]]
    headers = dict(dead[0].headers)
    assert headers["replicator.error.topic"] == b"payments-in"
    assert headers["replicator.error.offset"] == str(5).encode()
    assert b"not JSON" in headers["replicator.error.reason"]
    processor.close()


@pytest.mark.parametrize("lose_store", [False, True], ids=["store-intact", "store-deleted"])
def test_restart_restores_from_the_changelog(
    stream: LocalLog, tmp_path: Path, lose_store: bool
) -> None:
    stream.ensure_topic("payments-in", 2)
    first, second = payments(300, seed=3), payments(200, seed=4)
    produce(stream, "payments-in", [json.dumps(e).encode() for e in first])
    store = f"rocksdb://{tmp_path}/store"
    processor = make_processor(stream, store)
    processor.start()
    processor.run(idle_timeout_s=0.5)
    processor.close()
    if lose_store:
        import shutil

        shutil.rmtree(tmp_path / "store")
    produce(stream, "payments-in", [json.dumps(e).encode() for e in second])
    again = make_processor(stream, store)
    restored = again.start()
    if lose_store:
        assert restored.events >= len(expected_totals(first))  # rebuilt from the changelog
    else:
        assert restored.events == 0  # intact store: nothing to replay
    report = again.run(idle_timeout_s=0.5)
    assert report.events == 200  # committed input positions: nothing processed twice
    assert state_of(again) == expected_totals(first + second)
    again.close()


def test_snapshot_writes_every_row_as_a_read_event(stream: LocalLog) -> None:
    stream.ensure_topic("payments-in", 1)
    events = payments(100, seed=5)
    produce(stream, "payments-in", [json.dumps(e).encode() for e in events])
    processor = make_processor(stream, "memory://")
    processor.start()
    processor.run(idle_timeout_s=0.3)
    topic = processor.connector.topics[PAYMENTS_PER_CUSTOMER.name]
    before = {p: stream.bounds(topic, p).end for p in range(stream.partition_count(topic))}
    rows = processor.emit_snapshot()
    assert rows == len(expected_totals(events))
    reads = [
        parse_value(r.value, key=r.key)
        for p, start in before.items()
        for r in stream.read(topic, p, start)
    ]
    assert {e.op for e in reads if isinstance(e, ChangeEvent)} == {Op.READ}
    assert all(isinstance(e, ChangeEvent) and e.source.snapshot == "true" for e in reads)
    got = {e.after["customer_id"]: (e.after["payments"], e.after["total_amount"])
           for e in reads if isinstance(e, ChangeEvent) and e.after}  # fmt: skip
    assert got == expected_totals(events)
    processor.close()
