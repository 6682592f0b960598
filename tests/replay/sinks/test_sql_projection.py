"""SQL projections through the projection engine: after random workloads of inserts, updates,
deletes and truncates written to a change topic, every projection equals its own query run from
scratch over the source table replayed by the replay engine, in DuckDB and in Delta."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from cdc.streams.local import LocalLog
from projections import SqlProjection
from projections.change_ops import RowChange
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.versions import ProjectionVersions
from replay.sinks.registry import open_sink
from replay.tables.engine import ReplayEngine, ReplayJob
from tests.projections.sql.workload import PROJECTIONS, WORKLOADS, SourceMirror, normalized
from tests.replay.projection.workload import FEW, TOPIC, SalesTopic

pytestmark = pytest.mark.integration

DUCKDB_CASES = ("seed", "multi_key", "global")
"""The seeds' query; COUNT/SUM/AVG/MIN/MAX with WHERE and two group keys; no GROUP BY."""
BATCH = int(os.environ.get("PROJECTION_TEST_BATCH", "12"))
"""Offsets per engine batch (a workload round spans one to three batches)."""
ENGINE_WORKLOADS = WORKLOADS.map(lambda batches: batches[:3]).filter(
    lambda batches: any(op[0] == "insert" for op in batches[0])
)
"""At most three rounds, the first with an insert (a topic without events has no schema)."""


@pytest.fixture(autouse=True)
def _few_shuffle_partitions(spark: Any) -> Any:
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", previous)


def _scratch(store: Any, projection: SqlProjection, source: str) -> list[tuple[Any, ...]]:
    if store.dialect == "spark":  # the from-scratch query names the table plainly: a temp view
        store.frame(f"SELECT * FROM `{source}`", [source]).createOrReplaceTempView(source)
    sql = projection.from_scratch_sql(store.dialect, {projection.source_table: source})
    return normalized(store.query(sql))


def _check_workload(
    spark: Any, root: Path, scheme: str, names: tuple[str, ...], workload: list[Any],
    *, rewrite_bytes: int | None = None,
) -> None:  # fmt: skip
    log = LocalLog.from_url(f"local://{root}/log")
    url = f"{scheme}://{root}/out" + (".duckdb" if scheme == "duckdb" else "")
    sink = open_sink(url, spark)
    if rewrite_bytes is not None:  # a Delta sink: 0 MERGEs into every table
        sink.rewrite_bytes = rewrite_bytes  # type: ignore[attr-defined]
    topic = SalesTopic(log)
    mirror = SourceMirror({})
    engine = ProjectionEngine(spark, log, sink)
    jobs = [ProjectionJob(SqlProjection.parse(PROJECTIONS[n]), TOPIC, batch_offsets=BATCH)
            for n in names]  # fmt: skip
    try:
        for ops in workload:
            topic.write(mirror.changes(ops))
            for job in jobs:
                ProjectionVersions(engine, job.name).serve(job)
        # The replay engine reads the topic's schema from its newest event, which must not be a
        # truncate (it has no key): end on a row inserted and deleted again.
        extra = {"id": 10**6, "title": None, "region": None, "total_ticket_value": None,
                 "seats": None, "refunded": None}  # fmt: skip
        topic.write([RowChange("c", None, extra), RowChange("d", extra, None)])
        for job in jobs:
            ProjectionVersions(engine, job.name).serve(job)
        ReplayEngine(spark, log, sink).run(ReplayJob((TOPIC,)))
        for job in jobs:
            assert isinstance(job.definition, SqlProjection)
            got = normalized(ProjectionVersions(engine, job.name).rows())
            assert got == _scratch(engine.store, job.definition, "movie_ticket_sales"), job.name
            assert engine.lag(job) == {tp: 0 for tp in engine.lag(job)}
    finally:
        topic.close()
        sink.close()
        log.close()


@FEW
@given(workload=ENGINE_WORKLOADS)
def test_duckdb_projections_equal_their_query_from_scratch(
    spark: Any, tmp_path: Path, workload: list[Any]
) -> None:
    root = tmp_path / uuid.uuid4().hex[:8]
    _check_workload(spark, root, "duckdb", DUCKDB_CASES, workload)


@pytest.mark.parametrize("rewrite_bytes", [None, 0], ids=["rewrite", "merge"])
@FEW
@given(workload=ENGINE_WORKLOADS)
def test_delta_projections_equal_their_query_from_scratch(
    spark: Any, tmp_path: Path, rewrite_bytes: int | None, workload: list[Any]
) -> None:
    """Both ways of writing a batch: the small tables' rewrite (the default) and Delta's MERGE."""
    root = tmp_path / uuid.uuid4().hex[:8]
    _check_workload(spark, root, "delta", ("multi_key",), workload, rewrite_bytes=rewrite_bytes)
