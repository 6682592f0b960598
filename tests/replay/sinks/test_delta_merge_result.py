"""A projection's MERGE into a small Delta table, applied as one overwrite of the MERGE's result,
leaves the rows Delta's own MERGE of the same statement leaves: every kind of clause, clause
order, conditions that hold for no clause, null-safe keys, casts to the target's types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replay.sinks.delta_log import newest_operation
from replay.sinks.delta_projection import DeltaProjectionStore
from replay.sinks.delta_sink import DeltaSink

pytestmark = pytest.mark.integration

TARGET = [(1, 10, "a"), (2, 20, "b"), (3, 30, "c"), (None, 40, "n"), (5, 50, "e"), (8, 80, "h")]
SOURCE = [
    (1, 5, "d"),  # matched, deleted
    (2, 7, "u"),  # matched, updated by the first UPDATE
    (3, 0, "x"),  # matched, no clause's condition holds: kept as it was
    (None, 1, "u"),  # matched through the null-safe key
    (8, 2, "z"),  # matched, updated by the unconditional second UPDATE
    (6, 60, "i"),  # not matched, inserted (the omitted column NULL)
    (7, 70, "skip"),  # not matched, no INSERT's condition holds
]
STATEMENT = (
    "MERGE INTO `t` AS `__t` USING (SELECT k, v, op FROM src) AS `__s` "
    "ON `__t`.`k` IS NOT DISTINCT FROM `__s`.`k` "
    "WHEN MATCHED AND `__s`.`op` = 'd' THEN DELETE "
    "WHEN MATCHED AND `__s`.`op` = 'u' THEN UPDATE SET `v` = `__t`.`v` + `__s`.`v`, "
    "`note` = `__s`.`op` "
    "WHEN MATCHED AND `__s`.`op` = 'z' THEN UPDATE SET `v` = `__s`.`v` * 100 "
    "WHEN NOT MATCHED AND `__s`.`op` <> 'skip' THEN INSERT (`k`, `v`) "
    "VALUES (`__s`.`k`, `__s`.`v` * 2)"
)


def _merged(spark: Any, root: Path, rewrite_bytes: int) -> tuple[list[Any], str, str | None]:
    """The table's rows, schema and newest operation after the statement, written one way."""
    store = DeltaProjectionStore(DeltaSink(root, spark, rewrite_bytes=rewrite_bytes))
    target = spark.createDataFrame(TARGET, "k INT, v BIGINT, note STRING")
    target.write.format("delta").save(str(root / "t"))
    spark.createDataFrame(SOURCE, "k INT, v INT, op STRING").createOrReplaceTempView("src")
    store.write(STATEMENT, ["t"])
    table = spark.read.format("delta").load(str(root / "t"))
    rows = sorted((tuple(r) for r in table.collect()), key=repr)
    return rows, table.schema.simpleString(), newest_operation(root / "t")


def test_the_rewrite_leaves_the_rows_delta_merge_leaves(spark: Any, tmp_path: Path) -> None:
    merged, merged_schema, merge_op = _merged(spark, tmp_path / "merge", 0)
    rewritten, rewritten_schema, rewrite_op = _merged(spark, tmp_path / "rewrite", 1 << 20)
    assert (merge_op, rewrite_op) == ("MERGE", "WRITE")
    assert rewritten == merged
    assert rewritten_schema == merged_schema == "struct<k:int,v:bigint,note:string>"
    by_key = {k: (v, note) for k, v, note in rewritten}
    assert by_key == {
        2: (27, "u"), 3: (30, "c"), None: (41, "u"), 5: (50, "e"), 8: (200, "h"), 6: (120, None)
    }  # fmt: skip


def test_statements_not_taken_apart_run_as_they_are(spark: Any, tmp_path: Path) -> None:
    """``UPDATE SET *`` is not taken apart: Delta's MERGE runs it, small table or not."""
    store = DeltaProjectionStore(DeltaSink(tmp_path, spark, rewrite_bytes=1 << 20))
    spark.createDataFrame([(1, 1)], "k INT, v BIGINT").write.format("delta").save(
        str(tmp_path / "t")
    )
    spark.createDataFrame([(1, 9), (2, 4)], "k INT, v BIGINT").createOrReplaceTempView("src2")
    store.write(
        "MERGE INTO `t` AS a USING src2 AS b ON a.k = b.k WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *",
        ["t"],
    )
    assert newest_operation(tmp_path / "t") == "MERGE"
    table = spark.read.format("delta").load(str(tmp_path / "t"))
    assert sorted(tuple(r) for r in table.collect()) == [(1, 9), (2, 4)]
