"""What the driver hands the JVM whole: its rows, as Arrow (``local_frame``: the one way a replay
builds a DataFrame of rows it holds; a frame comes back with ``spark.collect_arrow``), and lists
of columns it selects or groups by again and again (``ColumnList``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replay.spark import Column, DataFrame, F, SparkContext, SparkSession, T, session_confs


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[Any]], schema: T.StructType, *, spread: int = 0,
    types: Sequence[Any] | None = None,
) -> DataFrame:  # fmt: skip
    """A DataFrame of the driver's ``rows`` (tuples of values in ``schema``'s order), handed to
    the JVM as Arrow: unlike ``createDataFrame`` of a list, unpickled by Python workers in every
    job that reads it, nothing of it runs in Python. Flat schemas of simple types, or any with
    ``types``, the columns' Arrow types (of the ``toArrow`` table that gave the values).
    ``spread``: as that many partitions, not a local relation, whose operators the optimizer
    interprets on the driver (``ConvertToLocalRelation``): for many rows, a job's compiled code
    on every core beats it (10,000 Connect-JSON change events: 0.6-1.2 s of a round's plan)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema.fields)
    arrays = [pa.array(list(v), type=types and types[i]) for i, v in enumerate(columns)]
    table = pa.Table.from_arrays(arrays, names=[f.name for f in schema.fields])
    if not spread or not rows:
        return spark.createDataFrame(table, schema)
    # Both read when the frame is made (``ArrowConverters.toDataFrame``): set for it only.
    with session_confs(spark, {
        "spark.sql.execution.arrow.localRelationThreshold": "0",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(-(-len(rows) // spread)),
    }):  # fmt: skip
        return spark.createDataFrame(table, schema)


class ColumnList:
    """Columns (or column names) handed to the JVM once, as one sequence: a ``select`` of them
    then costs one call into the JVM (``DataFrame.select`` converts its list at every call, a
    py4j call per column, each 0.1-1 ms on 2 busy cores: hundreds per ``--follow`` round). One
    list serves every frame with those columns; it lives in the session's JVM, like the
    expressions ``replay.expression_cache`` keeps."""

    def __init__(self, columns: Sequence[Column | str]) -> None:
        context = SparkContext._active_spark_context
        assert context is not None and context._jvm is not None, "no active SparkSession"
        java = [(F.col(c) if isinstance(c, str) else c)._jc for c in columns]
        self.java = context._jvm.PythonUtils.toSeq(java)

    def select_from(self, frame: DataFrame) -> DataFrame:
        """``frame.select(*columns)``."""
        return type(frame)(frame._jdf.select(self.java), frame.sparkSession)

    def aggregate(self, frame: DataFrame, first: Column, rest: ColumnList) -> DataFrame:
        """``frame.groupBy(*columns).agg(first, *rest)``."""
        grouped = frame._jdf.groupBy(self.java)
        return type(frame)(grouped.agg(first._jc, rest.java), frame.sparkSession)
