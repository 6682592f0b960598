"""Read-model projections over change streams, and how to maintain them incrementally.

- SQL projections (:class:`SqlProjection`): ``CREATE TABLE name AS SELECT ... GROUP BY ...`` with
  COUNT/SUM/AVG/MIN/MAX, kept from signed source rows by generated SQL (DuckDB, Spark SQL);
- Python projections (:class:`PythonProjection`): a fold over change events into keyed rows;
- SCD type 1/2 projections (:class:`ScdSpec`): APPLY CHANGES INTO semantics, late events placed
  by their sequence;
- blue/green versions (:class:`BlueGreen`): the readers' view swapped between stored versions.

This package plans and defines semantics; the replay engine (``replay``) executes the plans.
"""

from projections.blue_green import BlueGreen, ProjectionVersion, version_table
from projections.errors import ProjectionError, ProjectionNotIncrementalError
from projections.python_fold import (
    FoldContext,
    FoldResult,
    PythonProjection,
    PythonProjectionExecutor,
    fold_changes,
)
from projections.scd.executor import ScdDelta, ScdExecutor, scd_reference
from projections.scd.spec import END_AT, START_AT, ScdChange, ScdSpec, scd_changes
from projections.signed_rows import (
    SIGN,
    SignedBatch,
    signed_rows,
    signed_rows_sql,
    snapshot_signed_sql,
)
from projections.sql.parse import SqlProjection
from projections.sql.plan import IncrementalPlan, RecomputePlan
from projections.sql.query import Aggregate, GroupKey, OutputColumn, ParsedProjection

__all__ = [
    "END_AT",
    "SIGN",
    "START_AT",
    "Aggregate",
    "BlueGreen",
    "FoldContext",
    "FoldResult",
    "GroupKey",
    "IncrementalPlan",
    "OutputColumn",
    "ParsedProjection",
    "ProjectionError",
    "ProjectionNotIncrementalError",
    "ProjectionVersion",
    "PythonProjection",
    "PythonProjectionExecutor",
    "RecomputePlan",
    "ScdChange",
    "ScdDelta",
    "ScdExecutor",
    "ScdSpec",
    "SignedBatch",
    "SqlProjection",
    "fold_changes",
    "scd_changes",
    "scd_reference",
    "signed_rows",
    "signed_rows_sql",
    "snapshot_signed_sql",
    "version_table",
]
