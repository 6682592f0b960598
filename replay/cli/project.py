"""``replicator project``: maintain a SQL projection from a change topic into DuckDB or Delta.

The projection reads one source table; its topic is ``--topic``, or the one topic of the stream
whose last dotted part names the table (``FROM movie_ticket_sales`` reads
``demo.movie_ticket_sales``). The first run builds version 1 and serves it under the projection's
name; later runs catch the served version up from its ledger; ``--rebuild`` builds the next
version beside it, verifies and swaps; ``--rollback`` serves the previous version again.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from cdc.errors import UsageError
from cdc.events.declarations import load_declarations
from projections import SqlProjection
from replay.cli.follow import follow_rounds
from replay.cli.replay import add_follow_arguments
from replay.cli.spark_options import add_spark_arguments, spark_settings


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream", required=True, help="kafka://host:port or local:///dir")
    p.add_argument("--sink", required=True, help="duckdb:///path.duckdb or delta:///dir")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--sql", help="CREATE TABLE <name> AS SELECT ... (one statement)")
    source.add_argument("--sql-file", help="a file holding the projection's SQL")
    p.add_argument("--topic", help="the source table's change topic (default: found by name)")
    p.add_argument("--schema", help="JSON file declaring the table of a schemaless topic")
    add_follow_arguments(p)
    p.add_argument(
        "--rebuild", action="store_true", help="build the next version beside, verify, swap"
    )
    p.add_argument("--no-verify", action="store_true", help="swap a rebuild without verifying")
    p.add_argument("--rollback", action="store_true", help="serve the previous version again")
    p.add_argument("--batch-offsets", type=int, default=2_000_000)
    add_spark_arguments(p)


def source_topic(topics: list[str], table: str, chosen: str | None) -> str:
    """The topic holding ``table``'s changes: ``chosen``, or the only one named after it."""
    if chosen:
        if chosen not in topics:
            raise UsageError(f"--topic {chosen}: no such topic (there are {len(topics)})")
        return chosen
    found = [t for t in topics if t.rsplit(".", 1)[-1] == table]
    if len(found) != 1:
        named = ", ".join(found) if found else "none"
        raise UsageError(f"table {table}: name its change topic with --topic (found: {named})")
    return found[0]


def run(args: argparse.Namespace) -> int:
    """Build, catch up, rebuild or roll back one SQL projection (a query it cannot maintain, a
    missing topic or column is a :class:`~cdc.errors.UserError`: one line, exit 2)."""
    from cdc.streams.registry import open_stream
    from replay.projection.engine import ProjectionEngine, ProjectionJob
    from replay.projection.versions import ProjectionVersions
    from replay.sinks.registry import open_sink, sink_path
    from replay.spark import spark_session

    console = Console()
    settings = spark_settings(args)
    projection = SqlProjection.parse(args.sql if args.sql else _read_sql(args.sql_file))
    projection.check_incremental()
    sink_path(args.sink)
    stream = open_stream(args.stream)
    try:
        topic = source_topic(stream.topics(), projection.source_table, args.topic)
        declared = load_declarations(args.schema).get(topic) if args.schema else None
    except BaseException:
        stream.close()
        raise
    spark = spark_session(args.master, conf=settings)
    sink = open_sink(args.sink, spark)
    try:
        engine = ProjectionEngine(spark, stream, sink)
        versions = ProjectionVersions(engine, projection.name)
        job = ProjectionJob(
            projection, topic, batch_offsets=args.batch_offsets, declared=declared,
            whole_transactions=not args.per_event, transaction_settle_s=args.transaction_settle,
        )  # fmt: skip
        if args.rollback:
            versions.rollback()
            console.print(f"{projection.name}: serving version {versions.state().active}")
            return 0
        if args.rebuild:
            report = versions.rebuild(job, verify=not args.no_verify)
            if report.verified is not None:
                console.print(report.verified.render())
            verdict = "swapped in" if report.swapped else "NOT swapped"
            console.print(f"{projection.name}: version {report.version} {verdict}")
            if not report.swapped:
                return 1

        def run_round() -> bool:
            result = versions.serve(job)
            _print(console, projection.name, result, engine.lag(job.at_version(_active(versions))))
            if engine.tail is not None and engine.tail.held:
                console.print(engine.tail.summary())
            return bool(result.entries)

        follow_rounds(run_round, follow=args.follow, poll_s=args.poll)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        sink.close()
        stream.close()


def _read_sql(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--sql-file {path}: {exc.strerror}") from exc


def _active(versions: Any) -> int:
    active = versions.state().active
    return int(active) if active is not None else 1


def _print(console: Console, name: str, result: Any, lag: dict[Any, int]) -> None:
    lags = ", ".join(f"{tp.partition}:{n}" for tp, n in sorted(lag.items()))
    console.print(
        f"{name} ({result.table}): {result.mode}, offset span {result.span:,}, "
        f"{len(result.entries)} commits, {result.seconds:.1f}s; lag per partition {lags}"
    )
