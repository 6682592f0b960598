"""Kill -9 trials of the replay engine, shared by the test suite and the benchmark.

A processor turns input events (payments, account closings that delete a customer's row, resets
that clear the table) into a changelog with updates, deletes and truncates. A trial replays that
changelog into a fresh DuckDB or Delta table in a worker process
(:mod:`tests.replay.tables.crash_worker`), SIGKILLs it at a seeded random moment (after k sink
writes plus a random delay: in Spark work, inside a sink write, between a Delta tombstone commit
and its table commit), checks what the crash left, sometimes resumes in another worker and kills
that too, then resumes in the calling process and checks the result.

After every crash: the ledger's positions only grow entry to entry (no batch recorded twice), a
Delta table has no commit past its newest ledger entry, and the table holds exactly the reference
at the ledger's newest positions: the input events folded in plain Python up to the input offset
whose change is the last one before those positions (per changelog partition, for the keys of
that partition). After the resume: the table equals the uninterrupted run (order-independent
checksum) and the reference of the whole input.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, InputEvent, ProcessorConfig
from cdc.state import StateTransaction
from cdc.streams.registry import open_stream
from replay.sinks import duckdb_files
from replay.sinks.delta_log import commit_versions
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink, sink_path
from replay.spark import SparkSession
from replay.verify import verify_tables
from tests.replay.crash_workers import TrialResult, Worker, WorkerPool
from tests.replay.tables.crash_worker import ReplayLayout, replay_to_end

KEY = ["customer_id"]
Totals = dict[str, tuple[int, Decimal]]


# -- the workload and its reference ---------------------------------------------------------


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


# -- the worker processes -------------------------------------------------------------------


class ReplayWorker(Worker):
    """A replay crash worker process (see :class:`Worker`)."""

    MODULE = "tests.replay.tables.crash_worker"


class ReplayWorkerPool(WorkerPool):
    """Hands out replay workers whose SparkSession is up (see :class:`WorkerPool`)."""

    worker_type = ReplayWorker


# -- the trials -------------------------------------------------------------------------------


def rows_of(sink: Sink, table: str) -> Totals:
    """The table's rows; a DuckDB table read with SQL, without a Spark job."""
    if isinstance(sink, DuckDBSink):
        sql = f"SELECT customer_id, payments, total_amount FROM {table}"
        return {r[0]: (r[1], r[2]) for r in duckdb_files.query(sink.path, sql)[1]}
    return {
        r["customer_id"]: (r["payments"], r["total_amount"]) for r in sink.read(table).collect()
    }


def writes_left(layout: ReplayLayout, positions: Mapping[int, int] | None) -> int:
    """How many sink writes a run from ``positions`` (None: no ledger) still makes."""
    per_partition = max(1, layout.batch_offsets // len(layout.end))
    start = positions if positions is not None else layout.prefix
    batches = max(math.ceil((layout.end[p] - start[p]) / per_partition) for p in layout.end)
    return batches + (positions is None)


def check_after_crash(
    spark: SparkSession, log: Changelog, layout: ReplayLayout, what: str
) -> dict[int, int] | None:
    """Assert the crash left the table exactly at its newest ledger entry; its positions."""
    sink = open_sink(layout.sink, spark)
    try:
        history = sink.history(layout.table)
        scheme, root = sink_path(layout.sink)
        versions = commit_versions(root / layout.table) if scheme == "delta" else []
        if not history:
            assert layout.table not in sink.tables() and not versions, f"{what}: data, no ledger"
            return None
        offsets = [[e.positions[tp] for tp in sorted(e.positions)] for e in history]
        for before, after in itertools.pairwise(offsets):
            assert before != after and all(a >= b for a, b in zip(after, before, strict=True)), (
                f"{what}: ledger positions {offsets} do not grow entry to entry"
            )
        newest = history[-1]
        if versions:
            assert versions[-1] == newest.version, (
                f"{what}: Delta commit {versions[-1]} past the ledger's {newest.version}"
            )
        positions = {tp.partition: o for tp, o in newest.positions.items()}
        expected = log.reference(positions)
        assert rows_of(sink, layout.table) == expected, (
            f"{what}: the table differs from the reference at the ledger's {positions}"
        )
        return positions
    finally:
        sink.close()


def run_trial(
    spark: SparkSession,
    pool: ReplayWorkerPool,
    log: Changelog,
    base: ReplayLayout,
    baseline: Sink,
    seed: int,
    sink_dir: Path,
) -> TrialResult:
    """One trial: 1-3 killed workers, then a resume in this process; assertion messages name
    the seed."""
    rng = random.Random(seed)
    started = time.monotonic()
    scheme = sink_path(base.sink)[0]
    layout = replace(base, sink=f"{scheme}://{sink_dir / f'trial-{seed}'}")
    result = TrialResult(seed)
    crashes = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    positions: dict[int, int] | None = None
    crash = 0
    while crash < crashes:
        crash += 1
        left = writes_left(layout, positions)
        if left < 2:
            break
        worker = pool.take()
        commits = rng.randrange(0, left - 1)
        what = f"seed {seed}, crash {crash} (after {commits} writes)"
        try:
            worker.start(layout)
            if worker.wait_for("committed", commits):  # else it ended first: checked below
                time.sleep(rng.uniform(0, pool.kill_delay_s()))
            pool.gaps += worker.write_gaps()
            finished = worker.proc.poll() is not None
        finally:
            worker.kill()
        if finished:
            assert worker.count("done"), (
                f"{what}: worker failed, exit status {worker.proc.returncode}, "
                f"stdout {worker.lines[-6:]}, stderr: {pool.stderr_tail()}"
            )
            if result.starts_over():  # a trial that never crashed tests nothing
                layout = replace(layout, sink=f"{layout.sink}-again")
                crash -= 1
            continue
        result.crashes += 1
        result.mid_write += worker.count("write") > worker.count("committed")
        positions = check_after_crash(spark, log, layout, what)
    sink = open_sink(layout.sink, spark)
    try:
        # The resume in one batch (split only at truncates): the ledger's positions compose.
        whole = replace(layout, batch_offsets=sum(layout.end.values()))
        replay_to_end(spark, whole, sink)
        what = f"seed {seed}, after resuming"
        history = sink.history(layout.table)
        assert history[-1].positions == layout.positions(layout.end), what
        assert rows_of(sink, layout.table) == fold(log.events), f"{what}: not the reference"
        report = verify_tables(sink.read(layout.table), baseline.read(layout.table), KEY)
        assert report.equal, f"{what}: not the uninterrupted run: {report.render()}"
    finally:
        sink.close()
    check_after_crash(spark, log, layout, f"seed {seed}, final ledger")
    result.seconds = time.monotonic() - started
    return result


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
