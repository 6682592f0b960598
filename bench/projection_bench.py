"""Incremental maintenance of the movie-tickets projection versus recomputing it from scratch.

    .venv/bin/python -m bench.projection_bench --events 1000000 --batch 100000 --sink duckdb

Writes N changes of ``movie_ticket_sales`` (90 % new sales, 7 % value corrections, 3 %
refunds as deletes) to a local-log changelog topic, then:

- **incremental**: the projection engine catches the seeds' projection up over the whole topic
  in batches of ``--batch`` offsets; rate = changes / time, and the time of the last batch;
- **from scratch**: what keeping the projection fresh without incremental maintenance costs per
  batch: rebuild the source table from the topic (the replay engine's fast path) and run the
  query over it; rate = ``--batch`` / that time.

Both results are checked equal. Prints a table and writes ``bench/results/projection-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
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


def generate(log: LocalLog, events: int, seed: int, per_txn: int = 5_000) -> None:
    """Append ``events`` changes of ``MOVIE_TICKET_SALES`` to ``TOPIC`` (4 partitions)."""
    rng = random.Random(seed)
    connector = ChangelogConnector("bench", [MOVIE_TICKET_SALES], partitions=4)
    log.ensure_topic(TOPIC, 4)
    writer = log.writer("bench-projection-feeder")
    live: dict[str, dict[str, Any]] = {}
    ids: list[str] = []
    for start in range(0, events, per_txn):
        txn = TransactionCounter("bench", start // per_txn + 1)
        origin = InputOrigin("sales", 0, start, start + per_txn)
        writer.begin()
        for i in range(start, min(events, start + per_txn)):
            roll = rng.random()
            if roll < 0.90 or not ids:
                value = Decimal(rng.choice(("9.50", "12.50", "15.50")))
                row = {"sale_id": f"s{i}", "title": rng.choice(TITLES), "total_ticket_value": value}
                before = None
                ids.append(row["sale_id"])
            else:
                sale = ids[rng.randrange(len(ids))]
                before = live.get(sale)
                if before is None:
                    continue
                row = None if roll > 0.97 else {**before, "total_ticket_value": Decimal("0.00")}
            key = {"sale_id": (row or before or {})["sale_id"]}
            change = CapturedChange.between(MOVIE_TICKET_SALES.name, key, before, row)
            if row is None:
                live.pop(key["sale_id"], None)
            else:
                live[key["sale_id"]] = row
            for out in connector.encode([change], origin, txn):
                writer.send(out.topic, out.key, out.value, partition=out.partition)
        writer.commit()
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--sink", choices=("duckdb", "delta"), default="duckdb")
    parser.add_argument("--work", default="bench-work/projection")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    from replay.engine import ReplayEngine, ReplayJob
    from replay.projection_engine import ProjectionEngine, ProjectionJob
    from replay.projection_versions import ProjectionVersions
    from replay.sinks.registry import open_sink
    from replay.spark import spark_session

    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = LocalLog.from_url(f"local://{work}/log")
    started = time.monotonic()
    generate(log, args.events, args.seed)
    generated_s = time.monotonic() - started
    spark = spark_session(app_name="projection-bench")
    suffix = ".duckdb" if args.sink == "duckdb" else ""
    sink = open_sink(f"{args.sink}://{work}/out{suffix}", spark)
    projection = SqlProjection.parse(SEED_SQL)
    engine = ProjectionEngine(spark, log, sink)
    versions = ProjectionVersions(engine, projection.name)
    job = ProjectionJob(projection, TOPIC, batch_offsets=args.batch)
    started = time.monotonic()
    result = versions.serve(job)
    incremental_s = time.monotonic() - started
    batches = [e.committed_at_ms for e in result.entries]
    last_batch_s = (batches[-1] - batches[-2]) / 1000 if len(batches) > 1 else incremental_s
    started = time.monotonic()
    ReplayEngine(spark, log, sink).run(ReplayJob((TOPIC,)))
    source = "movie_ticket_sales"
    if engine.store.dialect == "spark":  # the from-scratch query names the table plainly
        engine.store.frame(f"SELECT * FROM `{source}`", [source]).createOrReplaceTempView(source)
    sql = projection.from_scratch_sql(engine.store.dialect, {projection.source_table: source})
    scratch = sorted(engine.store.query(sql, [source]), key=repr)
    scratch_s = time.monotonic() - started
    served = sorted(versions.rows(), key=repr)
    out = {
        "events": args.events, "batch": args.batch, "sink": args.sink,
        "offsets": result.span, "batches": len(result.entries),
        "generate_s": round(generated_s, 2),
        "incremental_s": round(incremental_s, 2),
        "incremental_events_per_s": round(result.span / incremental_s),
        "incremental_last_batch_s": round(last_batch_s, 2),
        "scratch_s": round(scratch_s, 2),
        "scratch_events_per_s_per_batch": round(args.batch / scratch_s),
        "ratio_batch_scratch_over_incremental": round(scratch_s / last_batch_s, 2),
        "equal": served == scratch, "machine": platform.platform(),
    }  # fmt: skip
    print(json.dumps(out, indent=2))
    results = Path("bench/results")
    results.mkdir(parents=True, exist_ok=True)
    (results / f"projection-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(out))
    sink.close()
    log.close()
    if not out["equal"]:
        raise SystemExit("the incremental projection differs from the query run from scratch")


if __name__ == "__main__":
    main()
