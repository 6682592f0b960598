"""SCD type 2 and Python projections through the projection engine, in DuckDB and Delta: the
history equals ``scd_reference`` built from the logical changes (late and out-of-order versions
included), a fold equals its plain-Python reference, and side effects stay off while rebuilding."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cdc.state.table import StateTable
from cdc.streams.local import LocalLog
from projections import END_AT, START_AT, PythonProjection, ScdChange, ScdSpec, scd_reference
from projections.change_ops import RowChange
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.versions import ProjectionVersions
from replay.sinks.registry import open_sink
from tests.projections.sql.workload import SourceMirror
from tests.replay.projection.workload import FEW, TOPIC, SalesTopic

pytestmark = pytest.mark.integration

CUSTOMERS = StateTable("customers", {"id": int, "name": str, "city": str, "version": int}, key="id")
HISTORY = ScdSpec("customer_history", keys=["id"], sequence_by="version", stored_as=2,
                  except_column_list=["name"], track_history_column_list=["city"])  # fmt: skip
_OP = st.one_of(
    st.tuples(
        st.just("upsert"),
        st.integers(0, 3),
        st.sampled_from(["a", "b"]),
        st.sampled_from(["Oslo", "Rome", None]),
        st.integers(0, 40),
    ),
    st.tuples(st.just("delete"), st.integers(0, 3), st.integers(0, 40)),
    st.tuples(st.just("truncate")),
)
SCD_WORKLOADS = st.lists(st.lists(_OP, min_size=1, max_size=8), min_size=1, max_size=3).filter(
    lambda rounds: any(op[0] != "truncate" for ops in rounds for op in ops)
)
"""Workloads with a row change: a topic of truncates only has no schema yet, so no version is
served (the engine waits for a row event)."""


@pytest.fixture(autouse=True)
def _few_shuffle_partitions(spark: Any) -> Any:
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", previous)


def _changes(ops: list[Any]) -> tuple[list[RowChange], list[ScdChange]]:
    """Source changes to write, and the SCD changes they mean (the reference's input)."""
    rows, scd = [], []
    for op in ops:
        if op[0] == "upsert":
            row = {"id": op[1], "name": op[2], "city": op[3], "version": op[4]}
            rows.append(RowChange("u", None, row))
            scd.append(ScdChange("upsert", (op[1],), row, op[4]))
        elif op[0] == "delete":
            row = {"id": op[1], "name": None, "city": None, "version": op[2]}
            rows.append(RowChange("d", row, None))
            scd.append(ScdChange("delete", (op[1],), None, op[2]))
        else:
            rows.append(RowChange("t", None, None))
            scd.append(ScdChange("truncate"))
    return rows, scd


def _sorted(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    columns = ("id", "city", "version", START_AT, END_AT)
    return sorted((tuple(r[c] for c in columns) for r in rows), key=repr)


def _sink(spark: Any, root: Path, scheme: str) -> Any:
    return open_sink(f"{scheme}://{root}/out" + (".duckdb" if scheme == "duckdb" else ""), spark)


@pytest.mark.parametrize("scheme", ["duckdb", "delta"])
@FEW
@given(workload=SCD_WORKLOADS)
@example(workload=[[("truncate",)], [("upsert", 2, "b", "Oslo", 2)]])  # only a truncate first
@example(  # a late delete (sequence 3) of a key whose versions are at 10 and 19
    workload=[[("upsert", 1, "a", "Oslo", 10)], [("upsert", 1, "a", None, 19), ("delete", 1, 3)]]
)
@example(  # a late upsert after truncates (placed by arrival at the sequence high water)
    workload=[
        [
            ("upsert", 2, "b", "Oslo", 2),
            ("upsert", 2, "a", "Rome", 25),
            ("truncate",),
            ("upsert", 2, "b", "Oslo", 15),
            ("truncate",),
            ("upsert", 3, "a", None, 36),
        ]
    ]
)
def test_scd2_history_equals_the_reference(
    spark: Any, tmp_path: Path, scheme: str, workload: list[Any]
) -> None:
    root = tmp_path / uuid.uuid4().hex[:8]
    log = LocalLog.from_url(f"local://{root}/log")
    sink = _sink(spark, root, scheme)
    # One partition: a truncate has no sequence, so SCD places it by arrival (module doc of
    # replay.projection.driver_folds), and arrival across partitions is only ordered within a batch.
    topic = SalesTopic(log, partitions=1, table=CUSTOMERS)
    job = ProjectionJob(HISTORY, topic.topic, batch_offsets=5)
    logical: list[ScdChange] = []
    try:
        for ops in workload:
            written, meant = _changes(ops)
            topic.write(written)
            logical += meant
            # a new engine each round: the executor is re-folded from the topic (a restart)
            ProjectionVersions(ProjectionEngine(spark, log, sink), HISTORY.name).serve(job)
        got = ProjectionVersions(ProjectionEngine(spark, log, sink), HISTORY.name).read()
        assert _sorted([r.asDict() for r in got.collect()]) == _sorted(
            scd_reference(HISTORY, logical)
        )
    finally:
        topic.close()
        sink.close()
        log.close()


def _tickets_fold(effects: list[Any]) -> PythonProjection:
    def fold(change: Any, current: Any, ctx: Any) -> Any:
        row = current or {"sales": 0, "revenue": Decimal("0.00")}
        for image, sign in ((change.before, -1), (change.after, 1)):
            if image is not None:
                row["sales"] += sign
                row["revenue"] += sign * (image["total_ticket_value"] or 0)
        if not ctx.rebuilding:
            effects.append(ctx.key)  # e.g. a notification: never while rebuilding
        return row if row["sales"] else None

    return PythonProjection("title_sales", ["title"], fold)


@pytest.mark.parametrize("scheme", ["duckdb", "delta"])
def test_python_fold_through_the_engine(spark: Any, tmp_path: Path, scheme: str) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    sink = _sink(spark, tmp_path, scheme)
    topic, mirror = SalesTopic(log), SourceMirror({})
    effects: list[Any] = []
    job = ProjectionJob(_tickets_fold(effects), TOPIC, batch_offsets=6,
                        row_schema="title STRING, sales BIGINT, revenue DECIMAL(20,2)")  # fmt: skip
    workload = _FIXED_WORKLOAD
    try:
        topic.write(mirror.changes(workload[0]))
        ProjectionVersions(ProjectionEngine(spark, log, sink), "title_sales").serve(job)
        assert effects == []  # the first build replays history
        for ops in workload[1:]:
            topic.write(mirror.changes(ops))
            ProjectionVersions(ProjectionEngine(spark, log, sink), "title_sales").serve(job)
        assert effects  # live batches may have side effects
        want: dict[Any, list[Any]] = {}
        for row in mirror.rows.values():
            sales = want.setdefault(row["title"], [0, Decimal("0.00")])
            sales[0] += 1
            sales[1] += row["total_ticket_value"] or 0
        got = ProjectionVersions(ProjectionEngine(spark, log, sink), "title_sales").rows()
        assert sorted(got, key=repr) == sorted(((t, n, v) for t, (n, v) in want.items()), key=repr)
    finally:
        topic.close()
        sink.close()
        log.close()


_ROW = {"region": "eu", "seats": 2, "refunded": False}
_FIXED_WORKLOAD: list[list[Any]] = [
    [("insert", {**_ROW, "title": t, "total_ticket_value": Decimal(v)})
     for t, v in [("Dune", "9.50"), ("Heat", "12.00"), ("Dune", "45.25"), (None, "0.00")]],
    [("update", 0, {**_ROW, "title": "Heat", "total_ticket_value": Decimal("12.00")}),
     ("delete", 2), ("insert", {**_ROW, "title": "Zodiac", "total_ticket_value": None})],
    [("truncate",), ("insert", {**_ROW, "title": "Dune", "total_ticket_value": Decimal("9.50")}),
     ("update_key_only", 0, "Heat")],
]  # fmt: skip
