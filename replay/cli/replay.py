"""``replicator replay`` and ``replicator verify`` (Spark is imported only when they run)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from rich.console import Console

from cdc.errors import UsageError
from cdc.events.declarations import load_declarations
from replay.cli.follow import follow_rounds
from replay.cli.spark_options import add_spark_arguments, spark_settings
from replay.progress import ProgressBars
from replay.reading.bounds import Bound, BoundKind, parse_bound

if TYPE_CHECKING:
    from replay.tables.engine import ReplayJob


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream", required=True, help="kafka://host:port or local:///dir")
    p.add_argument("--sink", required=True, help="duckdb:///path.duckdb or delta:///dir")
    p.add_argument("--topics", required=True, help="comma-separated topics or regex patterns")
    p.add_argument(
        "--from",
        dest="start",
        default="ledger",
        help="earliest | ledger (default) | topic:partition:offset,... | ISO time",
    )
    p.add_argument("--until", dest="stop", default="latest",
                   help="latest | topic:partition:offset,... (exclusive) | ISO time (inclusive) "
                   "| lsn:X/Y | binlog:file:pos | txn:<processor>:<seq> (inclusive)")  # fmt: skip
    p.add_argument("--into", help="build this new table (point in time) instead of the topic's")
    p.add_argument("--schema", help="JSON file declaring the tables of schemaless topics "
                   "(columns, key, value modes)")  # fmt: skip
    p.add_argument("--on-error", choices=("fail", "dead-letter"), default="fail")
    p.add_argument("--allow-gaps", action="store_true", help="replay despite detected gaps")
    p.add_argument("--allow-type-rewrite", action="store_true",
                   help="a column narrowed or retyped mid-stream: cast older values to the new "
                   "type instead of stopping")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    add_follow_arguments(p)
    p.add_argument("--batch-offsets", type=int, default=2_000_000)
    add_spark_arguments(p)


def add_follow_arguments(p: argparse.ArgumentParser) -> None:
    """``--follow`` and ``--poll``, and how source transactions are applied (``replay`` and
    ``project`` alike)."""
    p.add_argument("--follow", action="store_true", help="keep applying new events until Ctrl-C "
                   "(a round the stream or the sink cannot serve is retried)")  # fmt: skip
    p.add_argument(
        "--per-event",
        action="store_true",
        help="apply events as they arrive, not whole source transactions",
    )
    p.add_argument("--transaction-settle", type=float, default=60.0, metavar="SECONDS",
                   help="transactions this much older than the newest transaction metadata "
                   "count as complete (default 60)")  # fmt: skip
    p.add_argument(
        "--poll",
        type=float,
        default=0.5,
        help="seconds to wait after a --follow round that found nothing new",
    )


def next_round(job: ReplayJob) -> ReplayJob:
    """The job of the next ``--follow`` round: the same tables, topics and options, from
    where the sink's ledger stands."""
    return dataclasses.replace(job, start=Bound(BoundKind.LEDGER))


def run_replay(args: argparse.Namespace) -> int:
    """Plan, then replay (or print the plan with ``--dry-run``)."""
    from cdc.streams.registry import open_stream
    from replay.driver_jit import ONE_SHOT_MAX_RECORDS
    from replay.reading.plan import resolve_topics, stored_records
    from replay.sinks.registry import open_sink, sink_path
    from replay.spark import spark_session
    from replay.tables.engine import ReplayEngine, ReplayJob, target_table

    console = Console()
    settings = spark_settings(args)
    topics = tuple(t for t in args.topics.split(",") if t)
    if not topics:
        raise UsageError("--topics names no topic")
    if args.into and len(topics) != 1:
        raise UsageError(f"--into {args.into} takes exactly one topic, not {len(topics)}")
    into = {topics[0]: args.into} if args.into else {}
    declared = load_declarations(args.schema) if args.schema else {}
    stop = parse_bound(args.stop, stop=True)
    if args.follow and stop.kind is not BoundKind.LATEST:
        raise UsageError(f"--follow keeps applying new events; it takes no --until ({args.stop})")
    job = ReplayJob(
        topics, start=parse_bound(args.start, stop=False), stop=stop,
        into=into, on_error=args.on_error, allow_gaps=args.allow_gaps,
        batch_offsets=args.batch_offsets, declared=declared, whole_transactions=not args.per_event,
        transaction_settle_s=args.transaction_settle, allow_type_rewrite=args.allow_type_rewrite,
    )  # fmt: skip
    sink_path(args.sink)
    stream = open_stream(args.stream)
    try:
        found = resolve_topics(stream, topics)  # a missing topic is reported before Spark starts
        # A replay that runs once and exits gets a JIT for a short life, if it is small.
        once = not (args.follow or args.dry_run)
        records = stored_records(stream, found, limit=ONE_SHOT_MAX_RECORDS) if once else None
    except BaseException:
        stream.close()
        raise
    spark = spark_session(args.master, conf=settings, one_shot_records=records)
    sink = open_sink(args.sink, spark)
    try:
        with ProgressBars(console) as bars:
            engine = ReplayEngine(spark, stream, sink, progress=bars.report)
            plans = engine.plans(job)
            if args.dry_run:
                for topic, plan in plans.items():
                    console.print(f"[bold]{topic}[/] -> {job.into.get(topic, target_table(topic))}")
                    console.print(plan.render())
                console.print(engine.transaction_tail(job, plans).render())
                return 0

            def run_round() -> bool:
                nonlocal job
                results = engine.run(job)
                for result in results:
                    console.print(
                        f"{result.topic} -> {result.table}: {result.mode}, offset span "
                        f"{result.span:,}, {len(result.entries)} commits, {result.bad} "
                        f"dead-lettered, {result.seconds:.1f}s"
                    )
                if engine.tail is not None and engine.tail.held:
                    console.print(engine.tail.summary())
                job = next_round(job)
                return any(r.entries for r in results)

            follow_rounds(run_round, follow=args.follow, poll_s=args.poll)
            return 0
    except KeyboardInterrupt:
        return 0
    finally:
        sink.close()
        stream.close()


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("left", help="SINK_URL#table, e.g. duckdb:///m.duckdb#customers")
    p.add_argument("right", help="SINK_URL#table, e.g. delta:///lake#customers")
    p.add_argument("--key", required=True, help="comma-separated primary-key columns")
    add_spark_arguments(p)


def run_verify(args: argparse.Namespace) -> int:
    """Compare two tables; exit 0 when they hold the same rows."""
    from replay.sinks.registry import open_sink
    from replay.spark import spark_session
    from replay.verify import verify_tables

    refs = [_table_ref(ref) for ref in (args.left, args.right)]
    key = [k for k in args.key.split(",") if k]
    if not key:
        raise UsageError("--key names no column")
    spark = spark_session(args.master, conf=spark_settings(args))
    sinks = [open_sink(url, spark) for url, _ in refs]
    try:
        frames = [sink.read(table) for sink, (_, table) in zip(sinks, refs, strict=True)]
        report = verify_tables(frames[0], frames[1], key)
    finally:
        for sink in sinks:
            sink.close()
    print(report.render())
    return 0 if report.equal else 1


def _table_ref(ref: str) -> tuple[str, str]:
    """``(sink URL, table)`` of ``SINK_URL#table``, the URL checked (nothing is opened)."""
    from replay.sinks.registry import require_stored

    url, _, table = ref.partition("#")
    if not table:
        raise UsageError(f"{ref!r} names no table: expected SINK_URL#table")
    require_stored(url, table)
    return url, table
