"""Declared column types of a state table: what our events carry, and how to read schemaless ones.

A ``TableSpec`` names its Connect schemas ``<server>.<table>.Envelope`` / ``.Value`` / ``.Key``
and maps each ``ColumnKind`` to the Connect type Debezium uses for it (see ``schema_builder``).
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cdc.events.value_modes import BinaryHandlingMode, DecimalHandlingMode, TimePrecisionMode


class ColumnKind(enum.StrEnum):
    """A column's type; the Python value each holds is given after the colon."""

    INT32 = "int32"
    """int in [-2**31, 2**31)"""
    INT64 = "int64"
    """int in [-2**63, 2**63)"""
    FLOAT64 = "float64"
    """float"""
    BOOLEAN = "boolean"
    """bool"""
    STRING = "string"
    """str"""
    BYTES = "bytes"
    """bytes"""
    DECIMAL = "decimal"
    """decimal.Decimal with at most ``scale`` fractional digits"""
    DATE = "date"
    """datetime.date"""
    TIMESTAMP = "timestamp"
    """naive datetime.datetime, microsecond precision"""
    TIMESTAMP_TZ = "timestamp-tz"
    """aware datetime.datetime (written in UTC)"""
    TIME = "time"
    """naive datetime.time, microsecond precision"""
    JSON = "json"
    """any JSON value: dict, list, str, int, Decimal, float, bool, None"""
    UUID = "uuid"
    """uuid.UUID"""


_TEMPORAL = frozenset({"date", "time", "timestamp"})
_FRACTIONAL = frozenset({"time", "timestamp"})


class Column(BaseModel):
    """One declared column. Decimals: ``scale`` (required), ``precision`` (digits) and
    ``decimal.handling.mode``; ``time``/``timestamp``: ``precision`` (fractional-second digits,
    0-9) and, with ``date``, ``time.precision.mode``; ``bytes``: ``binary.handling.mode``
    (see ``cdc.events.value_modes``)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    name: str
    type: ColumnKind
    optional: bool = True
    scale: int | None = None
    precision: int | None = None
    decimal_handling_mode: DecimalHandlingMode = Field(
        default="precise", alias="decimal.handling.mode"
    )
    time_precision_mode: TimePrecisionMode = Field(default="adaptive", alias="time.precision.mode")
    binary_handling_mode: BinaryHandlingMode = Field(default="bytes", alias="binary.handling.mode")

    @model_validator(mode="after")
    def _settings_fit_the_type(self) -> Column:
        kind, name = self.type.value, self.name
        if self.type is ColumnKind.DECIMAL and self.scale is None:
            raise ValueError(f"decimal column {name!r} needs a scale")
        if self.type is not ColumnKind.DECIMAL and (self.scale, self.decimal_handling_mode) != (
            None,
            "precise",
        ):
            raise ValueError(f"column {name!r} is not a decimal: no scale or decimal mode")
        if self.precision is not None and kind != "decimal" and kind not in _FRACTIONAL:
            raise ValueError(f"column {name!r} is a {kind}: precision is for decimal, time, "
                             "timestamp")  # fmt: skip
        if kind in _FRACTIONAL and self.precision is not None and not 0 <= self.precision <= 9:
            raise ValueError(f"column {name!r}: fractional-second precision must be 0..9")
        if kind not in _TEMPORAL and self.time_precision_mode != "adaptive":
            raise ValueError(f"column {name!r} is a {kind}: time.precision.mode is for date, "
                             "time, timestamp")  # fmt: skip
        if self.type is not ColumnKind.BYTES and self.binary_handling_mode != "bytes":
            raise ValueError(f"column {name!r} is a {kind}: binary.handling.mode is for bytes")
        return self


class TableSpec(BaseModel):
    """A state table's declared shape: its columns, its key columns, and the schema names.

    ``server`` is the logical server name (topic prefix) and ``table`` the table name, so the
    envelope schema is ``<server>.<table>.Envelope``.
    """

    model_config = ConfigDict(frozen=True)

    server: str
    table: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _columns_consistent(self) -> TableSpec:
        names = [column.name for column in self.columns]
        if not names:
            raise ValueError("a table needs at least one column")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate column names in {names}")
        unknown = [name for name in self.key if name not in names]
        if unknown:
            raise ValueError(f"key columns {unknown} are not columns of the table")
        return self

    @property
    def schema_prefix(self) -> str:
        """``<server>.<table>``, the prefix of the Connect schema names."""
        return f"{self.server}.{self.table}"

    @property
    def key_columns(self) -> tuple[Column, ...]:
        """The key columns, in key order."""
        by_name = {column.name: column for column in self.columns}
        return tuple(by_name[name] for name in self.key)
