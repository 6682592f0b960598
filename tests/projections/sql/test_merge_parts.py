"""MERGE statements taken apart: the plans' own MERGEs in full, anything else not at all."""

from __future__ import annotations

import pytest

from projections import IncrementalPlan, SqlProjection
from projections.sql.merge_parts import MergeClause, merge_parts
from projections.sql.syntax import SPARK


def _plan() -> IncrementalPlan:
    plan = SqlProjection.parse(
        "CREATE TABLE sold AS SELECT title, COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo "
        "FROM sales GROUP BY title"
    ).check_incremental("sold")
    assert isinstance(plan, IncrementalPlan)
    return plan


def test_a_plans_merges_are_taken_apart_clause_by_clause() -> None:
    values, master = _plan().apply_statements("__signed", SPARK)
    parts = merge_parts(master, SPARK)
    assert parts is not None
    assert (parts.target, parts.target_alias, parts.source_alias) == ("sold", "__t", "__s")
    assert parts.on == "`__t`.`title` IS NOT DISTINCT FROM `__s`.`title`"
    assert parts.source.startswith("WITH `__d` AS (SELECT") and "`sold__values_0`" in parts.source
    assert [(c.matched, c.action) for c in parts.clauses] == [
        (True, "delete"), (True, "update"), (False, "insert")
    ]  # fmt: skip
    assert parts.clauses[0].condition == "`__t`.`__rows` + `__s`.`__rows` = 0"
    assert parts.clauses[1].condition is None
    assert dict(parts.clauses[1].values)["__rows"] == "`__t`.`__rows` + `__s`.`__rows`"
    assert [c for c, _ in parts.clauses[2].values] == [
        "title", "__rows", "__count_0", "__sum_0", "__min_0"
    ]  # fmt: skip
    value_parts = merge_parts(values, SPARK)
    assert value_parts is not None and value_parts.target == "sold__values_0"


def test_a_table_as_source_is_read_whole() -> None:
    parts = merge_parts(
        "MERGE INTO `x` AS t USING rows AS s ON t.a = s.a WHEN NOT MATCHED THEN INSERT (a) "
        "VALUES (s.a)",
        SPARK,
    )
    assert parts is not None and parts.source == "SELECT * FROM rows"
    assert parts.clauses == (MergeClause(False, None, "insert", (("a", "s.a"),)),)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1",
        "MERGE INTO x AS t USING y AS s ON t.a = s.a WHEN MATCHED THEN UPDATE SET *",
        "MERGE INTO x AS t USING y AS s ON t.a = s.a WHEN NOT MATCHED THEN INSERT *",
        "MERGE INTO x AS t USING y AS s ON t.a = s.a WHEN NOT MATCHED BY SOURCE THEN DELETE",
        "MERGE INTO x USING y ON x.a = y.a WHEN MATCHED THEN DELETE",
        "MERGE INTO",
        "MERGE INTO `a`.`b` AS t USING y AS s ON t.a = s.a WHEN MATCHED THEN DELETE",
        "MERGE INTO x AS t USING db.y AS s ON t.a = s.a WHEN MATCHED THEN DELETE",
        "MERGE INTO x AS t USING y VERSION AS OF 3 AS s ON t.a = s.a WHEN MATCHED THEN DELETE",
        "MERGE INTO x AS t USING (SELECT 1 AS a) AS s(b) ON t.a = s.b WHEN MATCHED THEN DELETE",
        "MERGE INTO x AS t USING y AS s ON t.a = s.a WHEN MATCHED THEN UPDATE SET st.f = 1",
        "MERGE INTO x AS t USING y AS s ON t.a = s.a WHEN MATCHED THEN UPDATE SET a = 1, A = 2",
    ],
)
def test_other_statements_are_not_taken_apart(statement: str) -> None:
    assert merge_parts(statement, SPARK) is None
