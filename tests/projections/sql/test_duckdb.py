"""SQL projections maintained incrementally on DuckDB equal their query run from scratch, after
every batch of random inserts, updates (group-key changes, NULLs), deletes and truncates."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings

from projections import IncrementalPlan, SqlProjection, signed_rows
from projections.change_ops import RowChange
from tests.projections.sql.workload import (
    COLUMNS,
    PROJECTIONS,
    SEED,
    SOURCE,
    SOURCE_DDL,
    WORKLOADS,
    SourceMirror,
    normalized,
)

SIGNED = "signed_changes"


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value).upper() if isinstance(value, bool) else str(value)


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[list[Any]]) -> None:
    """One multi-row INSERT of literals (parameter binding costs more than the merge)."""
    if rows:
        values = ", ".join(f"({', '.join(_literal(v) for v in row)})" for row in rows)
        con.execute(f"INSERT INTO {table} VALUES {values}")


class DuckDbProjection:
    """A source mirror table and one projection kept from signed batches, on one connection."""

    def __init__(self, sql: str) -> None:
        self.con = duckdb.connect()
        self.con.execute(SOURCE_DDL)
        self.con.execute(f"CREATE TABLE {SIGNED} AS SELECT *, 1 AS __sign FROM {SOURCE} LIMIT 0")
        plan = SqlProjection.parse(sql).check_incremental()
        assert isinstance(plan, IncrementalPlan)
        self.plan = plan
        for statement in plan.create_statements(SIGNED):
            self.con.execute(statement)
        self.mirror = SourceMirror({})

    def apply(self, changes: list[RowChange]) -> None:
        batch = signed_rows(changes, COLUMNS)
        self.con.execute("BEGIN")
        if batch.reset:
            for statement in self.plan.reset_statements():
                self.con.execute(statement)
        self.con.execute(f"DELETE FROM {SIGNED}")
        _insert(self.con, SIGNED, [[r[c] for c in (*COLUMNS, "__sign")] for r in batch.rows])
        for statement in self.plan.apply_statements(SIGNED):
            self.con.execute(statement)
        self.con.execute("COMMIT")

    def sync_source(self) -> None:
        self.con.execute(f"DELETE FROM {SOURCE}")
        _insert(self.con, SOURCE, [[r[c] for c in COLUMNS] for r in self.mirror.rows.values()])

    def visible(self) -> list[tuple[Any, ...]]:
        return normalized(self.con.execute(self.plan.visible_sql()).fetchall())

    def from_scratch(self) -> list[tuple[Any, ...]]:
        return normalized(self.con.execute(self.plan.from_scratch_sql()).fetchall())

    def run(self, batches: list[list[tuple[Any, ...]]]) -> None:
        for ops in batches:
            self.apply(self.mirror.changes(ops))
            self.sync_source()
            assert self.visible() == self.from_scratch()


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=WORKLOADS)
def test_incremental_equals_from_scratch(name: str, batches: list[list[tuple[Any, ...]]]) -> None:
    DuckDbProjection(PROJECTIONS[name]).run(batches)


def _row(id_: int, title: str | None, value: str | None, seats: int | None = 1) -> dict[str, Any]:
    price = None if value is None else Decimal(value)
    return {"id": id_, "title": title, "region": "eu", "total_ticket_value": price,
            "seats": seats, "refunded": False}  # fmt: skip


def test_the_seed_projection_counts_tickets_per_title() -> None:
    p = DuckDbProjection(SEED)
    dune, heat = _row(1, "Dune", "9.50"), _row(2, "Heat", "12.00")
    p.apply([RowChange("c", None, dune), RowChange("c", None, heat)])
    assert p.visible() == [("Dune", 1), ("Heat", 1)]
    moved = {**heat, "title": "Dune"}
    p.apply([RowChange("u", heat, moved)])
    assert p.visible() == [("Dune", 2)]
    p.apply([RowChange("d", dune, None), RowChange("d", moved, None)])
    assert p.visible() == []
    assert p.con.execute(f"SELECT COUNT(*) FROM {p.plan.table}").fetchone() == (0,)


def test_sum_of_only_nulls_is_null_and_count_ignores_nulls() -> None:
    p = DuckDbProjection(
        "CREATE TABLE t AS SELECT title, COUNT(*) AS n, COUNT(total_ticket_value) AS priced, "
        "SUM(total_ticket_value) AS total, AVG(total_ticket_value) AS mean "
        "FROM movie_ticket_sales GROUP BY title"
    )
    a, b = _row(1, "Dune", None), _row(2, "Dune", None)
    p.apply([RowChange("c", None, a), RowChange("c", None, b)])
    assert p.visible() == [("Dune", 2, 0, None, None)]
    priced = {**a, "total_ticket_value": Decimal("10.00")}
    p.apply([RowChange("u", a, priced)])
    assert p.visible() == [("Dune", 2, 1, Decimal("10.00"), 10.0)]
    p.apply([RowChange("u", priced, a)])
    assert p.visible() == [("Dune", 2, 0, None, None)]


def test_min_and_max_survive_deleting_the_current_extreme() -> None:
    p = DuckDbProjection(
        "CREATE TABLE t AS SELECT title, MIN(total_ticket_value) AS lo, "
        "MAX(total_ticket_value) AS hi FROM movie_ticket_sales GROUP BY title"
    )
    rows = [_row(i, "Dune", v) for i, v in enumerate(["5.00", "7.00", "7.00", "9.00"], 1)]
    p.apply([RowChange("c", None, r) for r in rows])
    assert p.visible() == [("Dune", Decimal("5.00"), Decimal("9.00"))]
    p.apply([RowChange("d", rows[0], None), RowChange("d", rows[3], None)])
    assert p.visible() == [("Dune", Decimal("7.00"), Decimal("7.00"))]
    p.apply([RowChange("d", rows[1], None)])  # one of two equal extremes
    assert p.visible() == [("Dune", Decimal("7.00"), Decimal("7.00"))]
    p.apply([RowChange("u", rows[2], {**rows[2], "total_ticket_value": None})])
    assert p.visible() == [("Dune", None, None)]


def test_a_truncate_resets_the_projection() -> None:
    p = DuckDbProjection(PROJECTIONS["global"])
    first = _row(1, "Dune", "9.50")
    p.apply([RowChange("c", None, first)])
    assert p.visible() == [(1, 1, 9.5, 1, Decimal("9.50"))]
    second = _row(2, "Heat", "3.00", seats=2)
    p.apply([RowChange("t", None, None), RowChange("c", None, second)])
    assert p.visible() == [(1, 2, 3.0, 2, Decimal("3.00"))]
    p.apply([RowChange("t", None, None)])
    assert p.visible() == [(0, None, None, None, None)]


def test_a_snapshot_bootstraps_the_state() -> None:
    from projections.signed_rows import snapshot_signed_sql
    from projections.sql.syntax import render

    p = DuckDbProjection(PROJECTIONS["multi_key"])
    inserts = [{**_row(0, t, "4.00", s)} for t, s in [("Dune", 1), ("Heat", 2)]]
    p.mirror.changes([("insert", {k: v for k, v in r.items() if k != "id"}) for r in inserts])
    p.sync_source()
    snapshot = render(snapshot_signed_sql(SOURCE, COLUMNS), "duckdb")
    p.con.execute(f"CREATE VIEW snapshot AS {snapshot}")
    for statement in p.plan.apply_statements("snapshot"):
        p.con.execute(statement)
    assert p.visible() == p.from_scratch()
    assert len(p.visible()) == 2
