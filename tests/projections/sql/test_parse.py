"""Parsing SQL projections, and the reasons given for queries that cannot be incremental."""

from __future__ import annotations

import pytest

from projections import (
    IncrementalPlan,
    ProjectionError,
    ProjectionNotIncrementalError,
    RecomputePlan,
    SqlProjection,
)
from tests.projections.sql.workload import PROJECTIONS, SEED


def test_the_seed_statement_parses_as_written() -> None:
    p = SqlProjection.parse(SEED)
    assert (p.name, p.source_table) == ("movie_tickets_sold", "movie_ticket_sales")
    assert [(k.column, k.sql) for k in p.group_by] == [("title", "title")]
    assert [(a.function, a.argument) for a in p.aggregates] == [("COUNT", "total_ticket_value")]
    assert p.where is None
    assert [c.name for c in p.columns] == ["title", "tickets_sold"]
    assert p.source_columns == ("title", "total_ticket_value")
    plan = p.check_incremental()
    assert isinstance(plan, IncrementalPlan)
    assert plan.table == "movie_tickets_sold__v1"
    assert plan.layout.columns == ["title", "__rows", "__count_0"]


def test_aggregates_keys_aliases_and_expressions() -> None:
    p = SqlProjection.parse(
        "CREATE OR REPLACE VIEW revenue AS SELECT s.region AS r, lower(title) AS t, "
        "COUNT(*) AS n, SUM(price * qty) AS revenue, AVG(price * qty) AS mean, MIN(price) lo, "
        "MAX(price) AS hi FROM shop.sales AS s WHERE qty > 0 AND NOT s.refunded "
        "GROUP BY r, lower(title)"
    )
    assert (p.name, p.source_table) == ("revenue", "shop.sales")
    assert [(k.column, k.sql) for k in p.group_by] == [("r", "region"), ("t", "LOWER(title)")]
    assert [(a.function, a.argument) for a in p.aggregates] == [
        ("COUNT", None), ("SUM", "price * qty"), ("AVG", "price * qty"), ("MIN", "price"),
        ("MAX", "price"),
    ]  # fmt: skip
    assert p.where == "qty > 0 AND NOT refunded"
    plan = p.check_incremental()
    assert isinstance(plan, IncrementalPlan)
    # SUM and AVG of one argument share its count and sum; MIN and MAX share one multiset.
    assert plan.layout.columns == [
        "r", "t", "__rows", "__count_0", "__sum_0", "__min_1", "__max_1",
    ]  # fmt: skip
    assert plan.tables == ("revenue__v1", "revenue__v1__values_1")


def test_a_bare_select_needs_a_name() -> None:
    with pytest.raises(ProjectionError, match="needs a name"):
        SqlProjection.parse("SELECT title, COUNT(*) AS n FROM t GROUP BY title")
    p = SqlProjection.parse("SELECT title, COUNT(*) AS n FROM t GROUP BY 1", name="per_title")
    assert p.name == "per_title" and p.group_by[0].column == "title"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT title, COUNT(*) FROM t GROUP BY title", "needs a name"),
        ("SELECT title, region, COUNT(*) AS n FROM t GROUP BY title", "region must appear"),
        ("SELECT title, COUNT(*) AS n FROM t WHERE COUNT(*) > 1 GROUP BY title", "WHERE cannot"),
        ("SELECT title AS a, COUNT(*) AS a FROM t GROUP BY title", "two select items"),
        ("SELECT title AS __x, COUNT(*) AS n FROM t GROUP BY title", "reserved"),
        ("SELECT u.title, COUNT(*) AS n FROM t GROUP BY u.title", "names a table"),
        ("SELECT title, COUNT(*) AS n FROM t GROUP BY 3", "not a select item position"),
        ("SELECT upper(title) AS title, COUNT(*) AS n FROM t GROUP BY title", "both a select"),
        ("SELECT 1; SELECT 2", "one SQL statement"),
        ("SELEC title FROM", "cannot parse"),
        ("DELETE FROM t", "a projection is"),
    ],
)
def test_invalid_definitions_say_what_is_wrong(sql: str, message: str) -> None:
    with pytest.raises(ProjectionError, match=message):
        SqlProjection.parse(sql, name="p")


REJECTED = [
    ("SELECT a.title, COUNT(*) AS n FROM a JOIN b ON a.id = b.id GROUP BY a.title", "joins"),
    ("SELECT title, COUNT(DISTINCT region) AS n FROM t GROUP BY title", "distinct values"),
    ("SELECT title, SUM(seats) OVER (PARTITION BY title) AS s FROM t", "window function"),
    ("SELECT title, COUNT(*) AS n FROM t GROUP BY title ORDER BY n", "ORDER BY"),
    ("SELECT title, COUNT(*) AS n FROM t GROUP BY title LIMIT 3", "LIMIT"),
    ("SELECT title, COUNT(*) AS n FROM t WHERE seats > RANDOM() GROUP BY title", "deterministic"),
    ("SELECT title, COUNT(*) AS n FROM t WHERE sold_at > NOW() GROUP BY title", "deterministic"),
    ("SELECT title, COUNT(*) AS n FROM t WHERE d > CURRENT_DATE GROUP BY title", "deterministic"),
    ("SELECT title, COUNT(*) AS n FROM t WHERE id IN (SELECT id FROM u) GROUP BY title",
     "subquery in WHERE"),
    ("SELECT title, n FROM (SELECT title, COUNT(*) AS n FROM t GROUP BY title) AS q",
     "not from one table"),
    ("WITH q AS (SELECT * FROM t) SELECT title, COUNT(*) AS n FROM q GROUP BY title", "WITH"),
    ("SELECT title, COUNT(*) AS n FROM t GROUP BY title UNION SELECT 'x', 1", "UNION"),
    ("SELECT DISTINCT title FROM t", "DISTINCT"),
    ("SELECT title, STDDEV(seats) AS s FROM t GROUP BY title", "not one of COUNT"),
    ("SELECT title, COUNT(*) FILTER (WHERE seats > 1) AS n FROM t GROUP BY title", "FILTER"),
    ("SELECT title, COUNT(*) AS n FROM t GROUP BY ROLLUP (title)", "ROLLUP"),
    ("SELECT title, seats FROM t WHERE seats > 1", "no GROUP BY and no aggregate"),
    ("SELECT * FROM t", "SELECT *"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "why"), REJECTED)
def test_non_incremental_queries_are_rejected_with_the_reason(sql: str, why: str) -> None:
    p = SqlProjection.parse(sql, name="p")
    with pytest.raises(ProjectionNotIncrementalError, match=why) as raised:
        p.check_incremental()
    assert raised.value.reasons == p.reasons
    assert 'maintain="recompute"' in str(raised.value)


def test_a_join_tells_why_in_words() -> None:
    p = SqlProjection.parse(REJECTED[0][0], name="by_title")
    with pytest.raises(ProjectionNotIncrementalError) as raised:
        p.check_incremental()
    assert str(raised.value).startswith(
        "projection by_title cannot be maintained incrementally: it joins several tables: a "
        "change on one side needs the matching rows of the other side"
    )


def test_every_reason_is_listed() -> None:
    p = SqlProjection.parse(
        "SELECT title, COUNT(DISTINCT region) AS n FROM t WHERE x < RANDOM() GROUP BY title "
        "ORDER BY title LIMIT 5",
        name="p",
    )
    assert len(p.reasons) == 4


def test_recompute_plan_for_what_cannot_be_incremental() -> None:
    sql = (
        "CREATE TABLE top_titles AS SELECT a.title, COUNT(*) AS n FROM sales AS a "
        "JOIN films AS f ON a.title = f.title GROUP BY a.title ORDER BY n DESC LIMIT 10"
    )
    projection = SqlProjection.parse(sql, maintain="recompute")
    plan = projection.check_incremental()
    assert isinstance(plan, RecomputePlan)
    assert plan.projection is projection and projection.source_tables == ("sales", "films")
    assert plan.reasons and plan.tables == ("top_titles__v1",)
    [statement] = plan.recompute_statements(sources={"films": "films_mirror"})
    assert statement.startswith('CREATE OR REPLACE TABLE "top_titles__v1" AS SELECT')
    assert "JOIN films_mirror AS f" in statement
    [spark] = plan.recompute_statements("spark")
    assert spark.startswith("CREATE OR REPLACE TABLE `top_titles__v1` USING DELTA AS SELECT")


def test_an_incremental_query_can_be_declared_recompute() -> None:
    plan = SqlProjection.parse(SEED, maintain="recompute").check_incremental("t__v3")
    assert isinstance(plan, RecomputePlan)
    assert plan.reasons == () and plan.visible_sql() == 'SELECT * FROM "t__v3"'


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_the_workload_projections_are_incremental(name: str) -> None:
    p = SqlProjection.parse(PROJECTIONS[name])
    assert p.reasons == ()
    assert isinstance(p.check_incremental(), IncrementalPlan)
