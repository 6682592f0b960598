"""The changelog of the replay kill -9 trials: payments with account closings (deletes) and resets
(truncates) run through a processor into a changelog topic, and the reference, the same input
events folded in plain Python."""

from __future__ import annotations

import json
import random
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, InputEvent, ProcessorConfig
from cdc.state import StateTransaction
from cdc.streams.registry import open_stream
from tests.replay.tables.crash_worker import ReplayLayout

Totals = dict[str, tuple[int, Decimal]]


def input_events(count: int, seed: int, customers: int = 40) -> list[dict[str, Any]]:
    """Payments, with about 6% account closings (a delete) and two resets (a truncate)."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for i in range(count):
        customer = f"c{rng.randrange(customers)}"
        if i in (count * 2 // 5, count * 3 // 4):
            events.append({"reset": True})
        elif rng.random() < 0.06:
            events.append({"customer_id": customer, "close": True})
        else:
            events.append({"customer_id": customer, "amount": f"{rng.randrange(1, 99999) / 100}"})
    return events


def handle(event: InputEvent, tx: StateTransaction) -> None:
    """The processor: count payments, delete a closed customer's row, clear on reset."""
    if event.value.get("reset"):
        tx[PAYMENTS_PER_CUSTOMER].clear()
    elif event.value.get("close"):
        tx[PAYMENTS_PER_CUSTOMER].delete(event.value["customer_id"])
    else:
        count_payment(event, tx)


def fold(events: list[dict[str, Any]]) -> Totals:
    """What the table holds after ``events``, computed without the processor or Spark."""
    state: Totals = {}
    for e in events:
        if e.get("reset"):
            state.clear()
        elif e.get("close"):
            state.pop(e["customer_id"], None)
        else:
            n, total = state.get(e["customer_id"], (0, Decimal("0.00")))
            state[e["customer_id"]] = (n + 1, total + Decimal(e["amount"]))
    return state


@dataclass
class Changelog:
    """A processor changelog of ``events`` on a stream, and what the test needs to know of it:
    per changelog partition, the offsets of its change events and the input offset each one's
    input record ends at; which partition each key lives in; the end offsets."""

    stream: str
    topic: str
    events: list[dict[str, Any]]
    end: dict[int, int]
    changes: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    partition_of: dict[str, int] = field(default_factory=dict)

    def reference(self, positions: Mapping[int, int]) -> Totals:
        """The table a replay up to ``positions`` (next offset per partition) must hold."""
        out: Totals = {}
        for partition, position in positions.items():
            changes = self.changes[partition]
            applied = bisect_left(changes, (position, -1))  # changes at offsets < position
            input_end = changes[applied - 1][1] if applied else 0
            state = fold(self.events[:input_end])
            out.update((k, v) for k, v in state.items() if self.partition_of[k] == partition)
        return out

    def layout(self, sink: str, batch_offsets: int, prefix_share: float = 0.12) -> ReplayLayout:
        prefix = {p: max(1, int(e * prefix_share)) for p, e in self.end.items()}
        return ReplayLayout(self.stream, self.topic, sink, prefix, self.end, batch_offsets)


def build_changelog(stream_url: str, processor_id: str, events: list[dict[str, Any]]) -> Changelog:
    """Run the processor over ``events`` (one input partition, two changelog partitions)."""
    stream = open_stream(stream_url)
    source = f"{processor_id}-in"
    stream.ensure_topic(source, 1)
    writer = stream.writer(f"{processor_id}-feeder")
    writer.begin()
    for i, event in enumerate(events):
        writer.send(source, str(i).encode(), json.dumps(event).encode())
    writer.commit()
    writer.close()
    config = ProcessorConfig(processor_id, (source,), changelog_partitions=2, commit_max_events=40)
    processor = EventProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], handle)
    processor.start()
    report = processor.run(max_events=len(events), idle_timeout_s=30)
    processor.close()
    assert report.events == len(events) and report.dead_lettered == 0, report
    topic = f"{processor_id}.{PAYMENTS_PER_CUSTOMER.name}"
    log = Changelog(stream_url, topic, events, {})
    for partition in range(stream.partition_count(topic)):
        log.end[partition] = stream.bounds(topic, partition).end
        log.changes[partition] = []
        for record in stream.read(topic, partition, 0):
            if record.value is None:
                continue  # a tombstone: the delete before it carries the change
            payload = json.loads(record.value)["payload"]
            log.changes[partition].append((record.offset, payload["source"]["input_offset_end"]))
            row = payload["after"] or payload["before"]
            if row is not None:
                log.partition_of[row["customer_id"]] = partition
    stream.close()
    assert log.reference(log.end) == fold(events)
    return log


def changelog_factory(
    request: Any, tmp_path_factory: Any, prefix: str, events: int, seed: int
) -> Callable[[str], Changelog]:
    """A module fixture's factory: one changelog per stream kind (``local`` or ``kafka``, the
    session broker), built on first use from ``input_events(events, seed)``."""
    built: dict[str, Changelog] = {}

    def get(kind: str) -> Changelog:
        if kind not in built:
            name = f"{prefix}-{int(time.time() * 1000)}"
            if kind == "kafka":
                url = f"kafka://{request.getfixturevalue('kafka_bootstrap')}"
            else:
                url = f"local://{tmp_path_factory.mktemp(prefix + '-log')}"
            built[kind] = build_changelog(url, name, input_events(events, seed=seed))
        return built[kind]

    return get
