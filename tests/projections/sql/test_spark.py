"""The Spark SQL generation: every statement parses as Spark SQL (sqlglot here; Spark's own parser
and a run on Delta tables in the integration test)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
import sqlglot

from projections import IncrementalPlan, SqlProjection, signed_rows
from tests.projections.sql.workload import COLUMNS, PROJECTIONS, SOURCE, SourceMirror

SIGNED_SCHEMA = (
    "id INT, title STRING, region STRING, total_ticket_value DECIMAL(10,2), seats INT, "
    "refunded BOOLEAN, __sign INT"
)


def _plan(sql: str, table: str | None = None) -> IncrementalPlan:
    plan = SqlProjection.parse(sql).check_incremental(table)
    assert isinstance(plan, IncrementalPlan)
    return plan


def _statements(plan: IncrementalPlan, signed: str) -> list[str]:
    return [
        *plan.create_statements(signed, "spark"),
        *plan.apply_statements(signed, "spark"),
        *plan.reset_statements("spark"),
        *plan.drop_statements("spark"),
        plan.delta_sql(signed, "spark"),
        *(plan.value_delta_sql(i, signed, "spark") for i in plan.value_tables),
        plan.visible_sql("spark"),
        plan.from_scratch_sql("spark"),
    ]


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_spark_statements_parse_as_spark_sql(name: str) -> None:
    plan = _plan(PROJECTIONS[name])
    for statement in _statements(plan, "signed"):
        parsed = sqlglot.parse_one(statement, read="spark")
        assert parsed.sql("spark") == statement  # nothing dialect-foreign was dropped
        assert '"' not in statement  # identifiers are back-quoted
    created = plan.create_statements("signed", "spark")
    assert all(" USING DELTA AS " in c for c in created)
    assert all("MERGE INTO `" in s for s in plan.apply_statements("signed", "spark"))


def test_null_safe_key_matching_in_both_dialects() -> None:
    plan = _plan(PROJECTIONS["multi_key"])
    [*_, duck] = plan.apply_statements("signed", "duckdb")
    [*_, spark] = plan.apply_statements("signed", "spark")
    assert '"__t"."title" IS NOT DISTINCT FROM "__s"."title"' in duck
    assert "`__t`.`title` IS NOT DISTINCT FROM `__s`.`title`" in spark


def _approx(rows: list[Any]) -> list[tuple[Any, ...]]:
    # Spark's AVG of a DECIMAL is DECIMAL(p+4, s+4); the view's sum/count keeps more digits.
    def value(v: Any) -> Any:
        return float(f"{float(v):.6g}") if isinstance(v, float | Decimal) else v

    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)


@pytest.mark.integration
def test_spark_parses_every_generated_statement(spark: Any) -> None:
    parser = spark._jsparkSession.sessionState().sqlParser()
    for sql in PROJECTIONS.values():
        for statement in _statements(_plan(sql), "signed"):
            parser.parsePlan(statement)


@pytest.mark.integration
def test_generated_spark_sql_maintains_delta_tables(spark: Any) -> None:
    # Delta MERGEs take seconds each in local mode: one projection (multi-column keys, WHERE,
    # MIN/MAX multisets, NULLs, a key change, a truncate) over two batches.
    suffix = uuid.uuid4().hex[:8]
    signed, source = f"signed_{suffix}", f"source_{suffix}"
    plan = _plan(PROJECTIONS["multi_key"], f"proj_{suffix}__v1")
    spark.createDataFrame([], SIGNED_SCHEMA).createOrReplaceTempView(signed)
    mirror = SourceMirror({})
    row = {"title": "Dune", "region": "eu", "total_ticket_value": Decimal("9.50"), "seats": 2,
           "refunded": False}  # fmt: skip
    batches: list[list[tuple[Any, ...]]] = [
        [("insert", row), ("insert", {**row, "seats": 4}), ("insert", {**row, "title": None}),
         ("update", 1, {**row, "total_ticket_value": None}), ("insert", {**row, "seats": 1})],
        [("truncate",), ("insert", {**row, "seats": 3}), ("insert", {**row, "region": None}),
         ("insert", {**row, "total_ticket_value": Decimal("1.00")}),
         ("update_key_only", 0, "Heat"), ("delete", 1)],
    ]  # fmt: skip
    try:
        for statement in plan.create_statements(signed, "spark"):
            spark.sql(statement)
        for ops in batches:
            batch = signed_rows(mirror.changes(ops), COLUMNS)
            rows = [tuple(r[c] for c in (*COLUMNS, "__sign")) for r in batch.rows]
            spark.createDataFrame(rows, SIGNED_SCHEMA).createOrReplaceTempView(signed)
            for statement in plan.reset_statements("spark") if batch.reset else []:
                spark.sql(statement)
            for statement in plan.apply_statements(signed, "spark"):
                spark.sql(statement)
            source_rows = [tuple(r[c] for c in COLUMNS) for r in mirror.rows.values()]
            schema = SIGNED_SCHEMA.removesuffix(", __sign INT")
            spark.createDataFrame(source_rows, schema).createOrReplaceTempView(source)
            visible = spark.sql(plan.visible_sql("spark")).collect()
            scratch = spark.sql(plan.from_scratch_sql("spark", {SOURCE: source})).collect()
            assert _approx([tuple(r) for r in visible]) == _approx([tuple(r) for r in scratch])
            assert visible
    finally:
        for statement in plan.drop_statements("spark"):
            spark.sql(statement)
