"""The demo's Spark part: replay the processor's changelog into DuckDB and into Delta, build the
seeds' ``movie_tickets_sold`` projection from the ``movie_ticket_sales`` changelog, rebuild the
payments table as of a mid-stream point into a separate table, and verify everything."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table

from cdc.connector import ChangelogConnector
from cdc.examples import PAYMENTS_PER_CUSTOMER, TICKETS_SOLD
from cdc.streams.protocol import EventStream, TopicPartition
from projections import SqlProjection
from replay.demo.checks import Check, DemoSettings, check_state_rows, ticket_reference
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.versions import ProjectionVersions
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink
from replay.spark import SparkSession, spark_session
from replay.tables.engine import ReplayEngine, ReplayJob
from replay.verify import verify_tables

PAYMENTS = "demo.payments_per_customer"
TICKETS = "demo.tickets_sold_per_title"
AS_OF = "payments_per_customer_as_of_mid"
SALES = "demo.movie_ticket_sales"
SEED_PROJECTION = (
    "CREATE TABLE movie_tickets_sold AS SELECT title, COUNT(total_ticket_value) AS tickets_sold "
    "FROM movie_ticket_sales GROUP BY title"
)


def _changelog_prefix(
    stream: EventStream, cut: dict[TopicPartition, int]
) -> dict[str, tuple[int, Decimal]]:
    """The payments table as of ``cut``, folded in plain Python from the changelog records."""
    connector = ChangelogConnector("demo", [PAYMENTS_PER_CUSTOMER, TICKETS_SOLD])
    rows: dict[str, tuple[int, Decimal]] = {}
    for tp, stop in cut.items():
        for record in stream.read(tp.topic, tp.partition, 0, stop):
            change = connector.decode(record)
            if change is None:
                continue
            key = change.key["customer_id"]
            if change.after is None:
                rows.pop(key, None)
            else:
                rows[key] = (change.after["payments"], change.after["total_amount"])
    return rows


def replay_and_verify(
    settings: DemoSettings, stream: EventStream, console: Console, checks: list[Check]
) -> None:
    """Replay, point-in-time rebuild, verify; appends the checks it made."""

    console.print("replaying the changelog on Spark into DuckDB and Delta ...")
    spark = spark_session(settings.spark_master, app_name="replicator-demo")
    duck_url = f"duckdb://{settings.out_dir}/replica.duckdb"
    delta_url = f"delta://{settings.out_dir}/delta"
    sinks = {"DuckDB": open_sink(duck_url, spark), "Delta": open_sink(delta_url, spark)}
    partitions = stream.partition_count(PAYMENTS)
    cut = {
        TopicPartition(PAYMENTS, p): stream.bounds(PAYMENTS, p).end // 2 for p in range(partitions)
    }
    projected: dict[str, dict[str, int]] = {}
    listing = Table(title="what the demo built")
    for column in ("table", "rows", "where"):
        listing.add_column(column)
    try:
        for name, sink in sinks.items():
            engine = ReplayEngine(spark, stream, sink)
            results = engine.run(ReplayJob((PAYMENTS, TICKETS)))
            rows = {r.table: sink.read(r.table).collect() for r in results}
            ok, detail = check_state_rows(settings, rows["payments_per_customer"],
                                          rows["tickets_sold_per_title"])  # fmt: skip
            checks.append(Check(f"{name} replica equals the reference", ok, detail))
            engine.run(ReplayJob((PAYMENTS,), stop=Bound(BoundKind.OFFSETS, offsets=cut),
                                 into={PAYMENTS: AS_OF}))  # fmt: skip
            got = _as_totals(sink.read(AS_OF).collect())
            want = _changelog_prefix(stream, cut)
            detail = f"{len(got)} rows as of offsets {sorted(cut.values())}"
            name_pit = f"{name} as-of-mid-stream table equals the changelog prefix"
            checks.append(Check(name_pit, got == want, detail))
            for table in ("payments_per_customer", "tickets_sold_per_title", AS_OF):
                where = duck_url if name == "DuckDB" else f"{delta_url}/{table}"
                listing.add_row(f"{name}: {table}", str(sink.read(table).count()), where)
            projected[name] = _project_tickets(settings, spark, stream, sink, checks, name)
            where = duck_url if name == "DuckDB" else f"{delta_url}/movie_tickets_sold__v1"
            listing.add_row(f"{name}: movie_tickets_sold", str(len(projected[name])), where)
        duck, delta = sinks["DuckDB"], sinks["Delta"]
        for table, key in (("payments_per_customer", ["customer_id"]), (AS_OF, ["customer_id"]),
                           ("tickets_sold_per_title", ["title"])):  # fmt: skip
            report = verify_tables(duck.read(table), delta.read(table), key)
            checks.append(Check(f"verify {table}: DuckDB = Delta", report.equal, report.render()))
        same = projected["DuckDB"] == projected["Delta"]
        checks.append(Check("movie_tickets_sold: DuckDB = Delta", same,
                            f"{len(projected['DuckDB'])} titles"))  # fmt: skip
        sample = duck.read("tickets_sold_per_title").orderBy("title").limit(12).collect()
    finally:
        for sink in sinks.values():
            sink.close()
    console.print(listing)
    tickets = Table(title="tickets_sold_per_title (DuckDB)")
    for column in ("title", "tickets_sold", "total_ticket_value", "movie_tickets_sold (SQL)"):
        tickets.add_column(column)
    for row in sample:
        tickets.add_row(row["title"], str(row["tickets_sold"]), str(row["total_ticket_value"]),
                        str(projected["DuckDB"].get(row["title"], "-")))  # fmt: skip
    console.print(tickets)
    console.print(f"[dim]projection: {SEED_PROJECTION}[/]")


def _project_tickets(
    settings: DemoSettings, spark: SparkSession, stream: EventStream, sink: Sink,
    checks: list[Check], name: str,
) -> dict[str, int]:  # fmt: skip
    """Serve the seeds' projection in ``sink`` (built, or caught up from its ledger) and check
    it against the tickets counted from the input alone; returns tickets sold per title."""

    engine = ProjectionEngine(spark, stream, sink)
    versions = ProjectionVersions(engine, "movie_tickets_sold")
    versions.serve(ProjectionJob(SqlProjection.parse(SEED_PROJECTION), SALES))
    got = {str(title): int(sold) for title, sold in versions.rows()}
    want = {title: sold for title, (sold, _) in ticket_reference(settings).items()}
    wrong = sorted(t for t in got.keys() | want.keys() if got.get(t) != want.get(t))
    detail = f"{len(got)} titles, {sum(got.values())} tickets" + (
        f"; first difference {wrong[0]}: got {got.get(wrong[0])}, want {want.get(wrong[0])}"
        if wrong else ""
    )  # fmt: skip
    checks.append(Check(f"{name} movie_tickets_sold (SQL projection) equals the input", not wrong,
                        detail))  # fmt: skip
    return got


def _as_totals(rows: list[Any]) -> dict[str, tuple[int, Decimal]]:
    return {r["customer_id"]: (r["payments"], r["total_amount"]) for r in rows}
