"""Spark to DuckDB types, and the hand-over of a DataFrame's columns between the two.

Data moves Spark -> DuckDB as Parquet files (Spark writes them, DuckDB reads them in the write's
transaction). Top-level timestamps and dates travel as plain integers (microseconds, days since
the epoch) so that neither the session's Parquet timestamp flavour (INT96) nor its calendar
rebase settings nor a time zone can shift them; DuckDB turns them back into TIMESTAMPTZ / DATE.
TIMESTAMP_NTZ travels as Parquet's own zone-less microsecond timestamp. Rows handed over as
Arrow (``staged_columns`` collected, or ``staged_arrow``) travel the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replay.expression_cache import ExpressionCache
from replay.sinks.duckdb_store import quote
from replay.spark import Column, F, T

_SIMPLE: dict[type[T.DataType], str] = {
    T.BooleanType: "BOOLEAN",
    T.ByteType: "TINYINT",
    T.ShortType: "SMALLINT",
    T.IntegerType: "INTEGER",
    T.LongType: "BIGINT",
    T.FloatType: "FLOAT",
    T.DoubleType: "DOUBLE",
    T.StringType: "VARCHAR",
    T.CharType: "VARCHAR",
    T.VarcharType: "VARCHAR",
    T.BinaryType: "BLOB",
    T.DateType: "DATE",
    T.TimestampType: "TIMESTAMPTZ",
    T.TimestampNTZType: "TIMESTAMP",
}


def duckdb_type(data_type: T.DataType) -> str:
    """The DuckDB type holding a Spark type's values without loss."""
    for spark_type, duck in _SIMPLE.items():
        if isinstance(data_type, spark_type):
            return duck
    if isinstance(data_type, T.DecimalType):
        return f"DECIMAL({data_type.precision},{data_type.scale})"
    if isinstance(data_type, T.ArrayType):
        return f"{duckdb_type(data_type.elementType)}[]"
    if isinstance(data_type, T.MapType):
        return f"MAP({duckdb_type(data_type.keyType)}, {duckdb_type(data_type.valueType)})"
    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{quote(f.name)} {duckdb_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT({fields})"
    raise TypeError(f"no DuckDB type for Spark type {data_type.simpleString()}")


_STAGING = object()  # the owner of the staged columns in the expression cache
_staged: ExpressionCache[list[Column]] = ExpressionCache()


def staged_columns(fields: Sequence[T.StructField]) -> list[Column]:
    """The Spark expressions handing ``fields`` over to DuckDB (built once per field list)."""
    key = tuple(fields)
    return _staged.get(_STAGING, key, lambda: [staged_column(f) for f in key])


def staged_column(field: T.StructField) -> Column:
    """The Spark expression writing ``field`` to the Parquet hand-over."""
    col = F.col(f"`{field.name.replace('`', '``')}`")
    if isinstance(field.dataType, T.TimestampType):
        col = F.unix_micros(col)
    elif isinstance(field.dataType, T.DateType):
        col = F.unix_date(col)
    return col.alias(field.name)


def staged_arrow(table: Any, fields: Sequence[T.StructField]) -> Any:
    """``fields`` of an Arrow table of ``toArrow``'s types, as ``staged_columns`` would have
    handed them over."""
    import pyarrow as pa  # type: ignore[import-untyped]

    columns = []
    for field in fields:
        column = table.column(field.name)
        if isinstance(field.dataType, T.TimestampType):
            column = column.cast(pa.int64())  # microseconds since the epoch, as ``unix_micros``
        elif isinstance(field.dataType, T.DateType):
            column = column.cast(pa.int32())  # days since the epoch, as ``unix_date``
        columns.append(column)
    return pa.Table.from_arrays(columns, names=[field.name for field in fields])


def restored_column(field: T.StructField) -> str:
    """The DuckDB expression reading ``field`` back from the Parquet hand-over."""
    name, data_type = quote(field.name), field.dataType
    if isinstance(data_type, T.TimestampType):
        return f"TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_microseconds({name}) AS {name}"
    if isinstance(data_type, T.DateType):
        return f"CAST(DATE '1970-01-01' + CAST({name} AS INTEGER) AS DATE) AS {name}"
    return f"CAST({name} AS {duckdb_type(data_type)}) AS {name}"


def column_definitions(schema: T.StructType) -> list[tuple[str, str]]:
    """``(name, DuckDB type)`` of each column of ``schema``."""
    return [(f.name, duckdb_type(f.dataType)) for f in schema.fields]
