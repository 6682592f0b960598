"""Blue/green versions of a projection on DuckDB: build beside, swap the view, roll back, retire."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest

from projections import (
    BlueGreen,
    IncrementalPlan,
    ProjectionError,
    SqlProjection,
    signed_rows,
    version_table,
)
from projections.change_ops import RowChange
from tests.projections.sql.workload import SEED

V2 = (
    "CREATE TABLE movie_tickets_sold AS SELECT title, COUNT(*) AS tickets_sold, "
    "SUM(total_ticket_value) AS revenue FROM movie_ticket_sales GROUP BY title"
)
SALES = [
    RowChange("c", None, {"title": "Dune", "total_ticket_value": Decimal("9.50")}),
    RowChange("c", None, {"title": "Dune", "total_ticket_value": Decimal("12.00")}),
]


def build(con: duckdb.DuckDBPyConnection, sql: str, number: int) -> IncrementalPlan:
    """Replay the sales into a new version's tables, as the engine would."""
    plan = SqlProjection.parse(sql).check_incremental(version_table("movie_tickets_sold", number))
    assert isinstance(plan, IncrementalPlan)
    con.execute("CREATE OR REPLACE TABLE signed (title VARCHAR, total_ticket_value DECIMAL(10,2), "
                "__sign INTEGER)")  # fmt: skip
    for row in signed_rows(SALES, ["title", "total_ticket_value"]).rows:
        con.execute("INSERT INTO signed VALUES (?, ?, ?)", list(row.values()))
    for statement in [*plan.create_statements("signed"), *plan.apply_statements("signed")]:
        con.execute(statement)
    return plan


def run(con: duckdb.DuckDBPyConnection, statements: list[str]) -> None:
    for statement in statements:
        con.execute(statement)


def test_swap_rollback_and_retire() -> None:
    con = duckdb.connect()
    versions = BlueGreen("movie_tickets_sold")
    versions, v1 = versions.add(build(con, SEED, 1))
    assert v1.tables == ("movie_tickets_sold__v1",)
    with pytest.raises(ProjectionError, match="not ready"):
        versions.swap(1)
    versions, statements = versions.mark_ready(1).swap(1)
    assert statements[0].startswith('CREATE OR REPLACE VIEW "movie_tickets_sold" AS SELECT')
    run(con, statements)
    assert con.execute("SELECT * FROM movie_tickets_sold").fetchall() == [("Dune", 2)]

    versions, _ = versions.add(build(con, V2, 2))
    versions, statements = versions.mark_ready(2).swap(2)
    run(con, statements)
    assert (versions.active, versions.previous) == (2, 1)
    assert con.execute("SELECT * FROM movie_tickets_sold").fetchall() == [
        ("Dune", 2, Decimal("21.50"))
    ]
    with pytest.raises(ProjectionError, match="served or is the rollback target"):
        versions.retire(1)

    versions, statements = versions.rollback()
    run(con, statements)
    assert (versions.active, versions.previous) == (1, None)
    assert con.execute("SELECT * FROM movie_tickets_sold").fetchall() == [("Dune", 2)]
    versions, drops = versions.retire(2)
    run(con, drops)
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert tables == {"movie_tickets_sold__v1", "signed"}
    assert [v.number for v in versions.versions] == [1] and versions.next_number == 2


def test_a_version_is_stored_under_its_number() -> None:
    plan = SqlProjection.parse(SEED).check_incremental("movie_tickets_sold__v7")
    with pytest.raises(ProjectionError, match="must be stored in movie_tickets_sold__v1"):
        BlueGreen("movie_tickets_sold").add(plan)
    with pytest.raises(ProjectionError, match="no previous version"):
        BlueGreen("movie_tickets_sold").rollback()


def test_spark_views() -> None:
    versions = BlueGreen("movie_tickets_sold", dialect="spark")
    plan = SqlProjection.parse(SEED).check_incremental()
    versions, _ = versions.add(plan)
    _, [statement] = versions.mark_ready(1).swap(1)
    assert statement.startswith("CREATE OR REPLACE VIEW `movie_tickets_sold` AS SELECT `__t`.")
