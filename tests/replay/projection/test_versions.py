"""Blue/green through the projection engine: version 2 of the seeds' projection is built beside
version 1 while another thread keeps appending changes, verified against it at a common cut and
swapped in; after the writer stops, the served view equals the reference (nothing lost, nothing
doubled), and a rollback serves version 1 again."""

from __future__ import annotations

import random
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from projections import SqlProjection
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.versions import ProjectionVersions
from replay.sinks.registry import open_sink
from tests.projections.sql.workload import SEED, SourceMirror
from tests.replay.projection.workload import TOPIC, SalesTopic

pytestmark = pytest.mark.integration


def _round(rng: random.Random) -> list[tuple[Any, ...]]:
    def title() -> str | None:
        return rng.choice(["Dune", "Heat", "Zodiac", None])

    def value() -> Decimal | None:
        return rng.choice([Decimal("9.50"), Decimal("12.00"), None])

    ops: list[tuple[Any, ...]] = []
    for _ in range(rng.randint(1, 6)):
        row = {"title": title(), "region": "eu", "total_ticket_value": value(), "seats": 1,
               "refunded": False}  # fmt: skip
        ops.append(rng.choice([("insert", row), ("insert", row), ("update", rng.randrange(50), row),
                               ("delete", rng.randrange(50))]))  # fmt: skip
    return ops


def _reference(mirror: SourceMirror) -> list[tuple[Any, ...]]:
    sold: dict[Any, int] = {}
    for row in mirror.rows.values():
        sold[row["title"]] = sold.get(row["title"], 0) + (row["total_ticket_value"] is not None)
    return sorted(sold.items(), key=repr)


def test_blue_green_rebuild_while_events_arrive(spark: Any, tmp_path: Path) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", spark)
    topic, mirror, rng = SalesTopic(log), SourceMirror({}), random.Random(5)
    job = ProjectionJob(SqlProjection.parse(SEED), TOPIC, batch_offsets=1_000)
    versions = ProjectionVersions(ProjectionEngine(spark, log, sink), "movie_tickets_sold")
    stop, written = threading.Event(), [0]

    def keep_writing() -> None:  # a few rounds spread over the rebuild's first batches
        while written[0] < 8:
            topic.write(mirror.changes(_round(rng)))
            written[0] += 1
            stop.wait(1.0)

    try:
        for _ in range(3):
            topic.write(mirror.changes(_round(rng)))
        versions.serve(job)
        assert versions.state().active == 1
        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            report = versions.rebuild(job)
        finally:
            stop.set()
            writer.join()
        assert report.verified is not None and report.verified.equal, report.verified
        assert report.swapped and written[0] >= 5
        state = versions.state()
        assert (state.active, state.previous) == (2, 1)
        versions.serve(job)  # catch the served version up after the writer stopped
        assert sorted(versions.rows(), key=repr) == _reference(mirror)
        assert all(lag == 0 for lag in versions.engine.lag(job.at_version(2)).values())
        versions.rollback()
        assert versions.state().active == 1
        versions.serve(job)
        assert sorted(versions.rows(), key=repr) == _reference(mirror)
    finally:
        topic.close()
        sink.close()
        log.close()
