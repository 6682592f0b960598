"""Incremental maintenance of the movie-tickets projection versus recomputing it from scratch.

    .venv/bin/python -m bench.projection_bench --events 1000000 --batch 100000 --sink duckdb

Writes the history (``--events`` minus the measured batches) of ``movie_ticket_sales`` changes
(90 % new sales, 7 % value corrections, 3 % refunds as deletes) to a local-log changelog topic,
builds the seeds' projection over it (a first build: the topic compacted, one write; see
``--history-batch``), then:

- **incremental**, ``--batches`` times: ``--batch`` new changes arrive and the served projection
  catches up; rate = the batch's offsets / its wall time (the median batch is reported);
- **from scratch**, once, over the whole topic: what keeping the projection fresh costs without
  incremental maintenance: rebuild the source table from the topic (the replay engine's fast
  path) and run the query over it.

The ratio is from-scratch time over the median incremental batch's time: how many times cheaper
it is to keep the projection fresh incrementally after ``--batch`` new changes. Both results are
checked equal. Prints JSON and writes ``bench/results/projection-<sink>-<size>-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.connector.changelog import ChangelogConnector, InputOrigin, TransactionCounter
from cdc.demo_workload import TITLES
from cdc.examples import MOVIE_TICKET_SALES
from cdc.state.changes import CapturedChange
from cdc.streams.local import LocalLog
from projections import SqlProjection

SEED_SQL = (
    "CREATE TABLE movie_tickets_sold AS SELECT title, COUNT(total_ticket_value) AS tickets_sold "
    "FROM movie_ticket_sales GROUP BY title"
)
TOPIC = "bench.movie_ticket_sales"


class SalesFeed:
    """Changes of ``MOVIE_TICKET_SALES`` on ``TOPIC`` (4 partitions), appended in parts: 90 %
    new sales, 7 % value corrections, 3 % refunds (deletes), from one seeded sequence."""

    def __init__(self, log: LocalLog, seed: int, per_txn: int = 5_000) -> None:
        self.log, self.per_txn, self.rng = log, per_txn, random.Random(seed)
        self.connector = ChangelogConnector("bench", [MOVIE_TICKET_SALES], partitions=4)
        self.live: dict[str, dict[str, Any]] = {}
        self.ids: list[str] = []
        self.events = self.txns = 0
        log.ensure_topic(TOPIC, 4)

    def append(self, events: int) -> None:
        """Append ``events`` more changes, in transactions of ``per_txn``."""
        writer = self.log.writer("bench-projection-feeder")
        for start in range(self.events, self.events + events, self.per_txn):
            self.txns += 1
            stop = min(self.events + events, start + self.per_txn)
            txn = TransactionCounter("bench", self.txns)
            origin = InputOrigin("sales", 0, start, stop)
            writer.begin()
            for i in range(start, stop):
                change = self._change(i)
                if change is None:
                    continue
                for out in self.connector.encode([change], origin, txn):
                    writer.send(out.topic, out.key, out.value, partition=out.partition)
            writer.commit()
        self.events += events
        writer.close()

    def _change(self, i: int) -> CapturedChange | None:
        rng = self.rng
        roll = rng.random()
        row: dict[str, Any] | None
        before: dict[str, Any] | None
        if roll < 0.90 or not self.ids:
            value = Decimal(rng.choice(("9.50", "12.50", "15.50")))
            row = {"sale_id": f"s{i}", "title": rng.choice(TITLES), "total_ticket_value": value}
            before = None
            self.ids.append(f"s{i}")
        else:
            before = self.live.get(self.ids[rng.randrange(len(self.ids))])
            if before is None:
                return None
            row = None if roll > 0.97 else {**before, "total_ticket_value": Decimal("0.00")}
        sale_id: str = (row or before or {})["sale_id"]
        key = {"sale_id": sale_id}
        if row is None:
            self.live.pop(sale_id, None)
        else:
            self.live[sale_id] = row
        return CapturedChange.between(MOVIE_TICKET_SALES.name, key, before, row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="changes in all")
    parser.add_argument("--batch", type=int, default=100_000, help="changes per measured batch")
    parser.add_argument("--batches", type=int, default=3, help="measured incremental batches")
    parser.add_argument(
        "--history-batch",
        type=int,
        default=1_000_000,
        help="the history build's batch_offsets: a first build is one write, which into Delta "
        "(signed on the driver) holds at most this many keys, else it goes by batches of this "
        "many offsets",
    )
    parser.add_argument("--sink", choices=("duckdb", "delta"), default="duckdb")
    parser.add_argument("--work", default="bench-work/projection")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    if args.batch * args.batches >= args.events:
        parser.error("--batch x --batches must be below --events (the rest is the history)")

    from replay.projection.engine import ProjectionEngine, ProjectionJob
    from replay.projection.versions import ProjectionVersions
    from replay.sinks.registry import open_sink
    from replay.spark import spark_session
    from replay.tables.engine import ReplayEngine, ReplayJob

    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = LocalLog.from_url(f"local://{work}/log")
    feed = SalesFeed(log, args.seed)
    started = time.monotonic()
    feed.append(args.events - args.batch * args.batches)
    generated_s = time.monotonic() - started
    spark = spark_session(app_name="projection-bench")
    suffix = ".duckdb" if args.sink == "duckdb" else ""
    sink = open_sink(f"{args.sink}://{work}/out{suffix}", spark)
    projection = SqlProjection.parse(SEED_SQL)
    engine = ProjectionEngine(spark, log, sink)
    versions = ProjectionVersions(engine, projection.name)
    started = time.monotonic()
    history = versions.serve(ProjectionJob(projection, TOPIC, batch_offsets=args.history_batch))
    history_s = time.monotonic() - started
    batch_s, batch_offsets = [], []
    for _ in range(args.batches):  # new changes arrive, the served projection catches up
        feed.append(args.batch)
        started = time.monotonic()
        step = versions.serve(ProjectionJob(projection, TOPIC, batch_offsets=args.batch * 2))
        batch_s.append(time.monotonic() - started)
        batch_offsets.append(step.span)
    started = time.monotonic()  # without incremental maintenance: rebuild, then the query
    ReplayEngine(spark, log, sink).run(ReplayJob((TOPIC,)))
    source = "movie_ticket_sales"
    if engine.store.dialect == "spark":  # the from-scratch query names the table plainly
        engine.store.frame(f"SELECT * FROM `{source}`", [source]).createOrReplaceTempView(source)
    sql = projection.from_scratch_sql(engine.store.dialect, {projection.source_table: source})
    scratch = sorted(engine.store.query(sql, [source]), key=repr)
    scratch_s = time.monotonic() - started
    served = sorted(versions.rows(), key=repr)
    median_s = statistics.median(batch_s)
    offsets = history.span + sum(batch_offsets)
    out = {
        "events": args.events, "offsets": offsets, "sink": args.sink, "batch": args.batch,
        "generate_s": round(generated_s, 2),
        "history_offsets": history.span, "history_batches": len(history.entries),
        "history_s": round(history_s, 2),
        "history_events_per_s": round(history.span / history_s),
        "batch_offsets": batch_offsets, "batch_s": [round(t, 2) for t in batch_s],
        "incremental_batch_median_s": round(median_s, 2),
        "incremental_events_per_s": round(statistics.median(batch_offsets) / median_s),
        "scratch_s": round(scratch_s, 2),
        "scratch_events_per_s": round(offsets / scratch_s),
        "ratio_scratch_over_incremental_batch": round(scratch_s / median_s, 2),
        "equal": served == scratch, "machine": platform.platform(),
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "loadavg_1m_end": os.getloadavg()[0],
    }  # fmt: skip
    print(json.dumps(out, indent=2))
    results = Path("bench/results")
    results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (results / f"projection-{args.sink}-{args.events // 1000}k-{stamp}.json").write_text(
        json.dumps(out)
    )
    sink.close()
    log.close()
    if not out["equal"]:
        raise SystemExit("the incremental projection differs from the query run from scratch")


if __name__ == "__main__":
    main()
