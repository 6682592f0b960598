"""A Delta projection's batch cut short after its mirror's write, and a mirror kept in Delta by
earlier releases moved into RocksDB: the projection still equals its query over the source."""

from __future__ import annotations

import pickle
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from projections import SqlProjection
from projections.change_ops import RowChange
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.sinks.delta_log import read_ledger
from replay.sinks.delta_mirror import DeltaMirror
from replay.sinks.delta_projection import DeltaProjectionStore
from replay.sinks.delta_sink import USER_METADATA
from replay.sinks.registry import open_sink
from replay.spark import session_confs
from tests.replay.projection.workload import TOPIC, SalesTopic

pytestmark = pytest.mark.integration

PROJECTION = SqlProjection.parse(
    "CREATE TABLE per_title AS SELECT title, COUNT(*) AS sales, SUM(total_ticket_value) AS value "
    "FROM movie_ticket_sales GROUP BY title"
)


def _sale(sale_id: int, title: str, value: str = "9.50") -> dict[str, Any]:
    return {"id": sale_id, "title": title, "region": "eu", "total_ticket_value": Decimal(value),
            "seats": 1, "refunded": False}  # fmt: skip


class Case:
    """A sales topic on a local log, its projection into a Delta sink, and the source's rows."""

    def __init__(self, spark: Any, root: Path) -> None:
        self.log = LocalLog.from_url(f"local://{root}/log")
        self.topic = SalesTopic(self.log)
        self.sink = open_sink(f"delta://{root}/out", spark)
        self.engine = ProjectionEngine(spark, self.log, self.sink)
        self.job = ProjectionJob(PROJECTION, TOPIC)
        self.rows: dict[int, dict[str, Any]] = {}

    def write(self, changes: list[RowChange]) -> None:
        self.topic.write(changes)
        for change in changes:
            if change.after is None:
                assert change.before is not None
                self.rows.pop(change.before["id"])
            else:
                self.rows[change.after["id"]] = change.after

    def visible(self) -> list[tuple[Any, ...]]:
        plan, _ = self.engine.sql_plan(self.job)
        return sorted(self.engine.store.query(plan.visible_sql("spark"), plan.tables))

    def expected(self) -> list[tuple[Any, ...]]:
        sales = Counter(r["title"] for r in self.rows.values())
        value: Counter[str] = Counter()
        for row in self.rows.values():
            value[row["title"]] += row["total_ticket_value"]
        return sorted((title, n, value[title]) for title, n in sales.items())

    def close(self) -> None:
        self.topic.close()
        self.sink.close()
        self.log.close()


def _changes(case: Case, first: int) -> list[RowChange]:
    """Updates and deletes of half the rows, and new rows."""
    out: list[RowChange] = []
    for n, (key, row) in enumerate(sorted(case.rows.items())):
        if n % 4 == 0:
            out.append(RowChange("d", row, None))
        elif n % 4 == 1:
            out.append(RowChange("u", row, _sale(key, "Heat", f"{n}.25")))
    return out + [RowChange("c", None, _sale(first + i, f"t{i % 3}")) for i in range(6)]


def test_a_batch_cut_short_before_its_master_commit_is_redone_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = Case(spark, tmp_path)

    def crash(*args: Any) -> None:
        raise KeyboardInterrupt("killed after the mirror's write, before the master's commit")

    try:
        case.write([RowChange("c", None, _sale(i, f"t{i % 3}")) for i in range(12)])
        case.engine.run(case.job)
        before, shown = case.engine.store.positions(case.job.table), case.visible()
        assert shown == case.expected()
        case.write(_changes(case, 100))
        with monkeypatch.context() as patch:
            patch.setattr(DeltaProjectionStore, "_commit_master", crash)
            with pytest.raises(KeyboardInterrupt):
                case.engine.run(case.job)
        assert case.engine.store.positions(case.job.table) == before and case.visible() == shown
        case.engine.run(case.job)
        assert case.visible() == case.expected()
        case.write(_changes(case, 200))  # the mirror is right after the redo, not only at it
        case.engine.run(case.job)
        assert case.visible() == case.expected()
    finally:
        case.close()


def test_a_mirror_kept_in_delta_is_moved_into_rocksdb(spark: Any, tmp_path: Path) -> None:
    """The layout of releases before 2026-12: the mirror a Delta table whose commits carry the
    batch's ledger metadata. A run moves it as of the master's last batch and goes on."""
    case = Case(spark, tmp_path)
    try:
        case.write([RowChange("c", None, _sale(i, f"t{i % 3}")) for i in range(12)])
        case.engine.run(case.job)
        _, sql = case.engine.sql_plan(case.job)
        path, master = tmp_path / "out" / sql.table, tmp_path / "out" / case.job.table
        with DeltaMirror(path, len(sql.keys)) as mirror:
            rows = [(*v, pos, deleted) for pos, deleted, v in map(pickle.loads, _values(mirror))]
        shutil.rmtree(path)
        [latest] = read_ledger(case.job.table, master, latest_only=True)
        names = [*sql.all_columns, "__pos", "__deleted"]
        with session_confs(spark, {USER_METADATA: latest.metadata}):
            spark.createDataFrame(rows, names).write.format("delta").save(str(path))
        case.write(_changes(case, 100))
        case.engine.run(case.job)
        assert case.visible() == case.expected()
        assert (
            not (path / "_delta_log").exists() and not path.with_name(path.name + ".delta").exists()
        )
    finally:
        case.close()


def _values(mirror: DeltaMirror) -> list[bytes]:
    return [value for _, value in mirror.store.scan("rows")]
