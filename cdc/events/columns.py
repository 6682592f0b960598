"""Declared column types of a state table: what our events carry, and how to read schemaless ones.

A ``TableSpec`` names its Connect schemas ``<server>.<table>.Envelope`` / ``.Value`` / ``.Key``
and maps each ``ColumnKind`` to the Connect type Debezium uses for it (see ``schema_builder``).
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DecimalHandlingMode = Literal["precise", "string", "double"]
"""Debezium's ``decimal.handling.mode``: how a decimal travels in the JSON of a schemaless topic:
``precise`` base64 of the unscaled bytes (or a JSON number with ``decimal.format=NUMERIC``),
``string`` plain decimal text, ``double`` a JSON number (rounded to the scale when read)."""


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


class Column(BaseModel):
    """One declared column; ``scale`` (and optionally ``precision``, ``decimal.handling.mode``)
    only for decimals."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    name: str
    type: ColumnKind
    optional: bool = True
    scale: int | None = None
    precision: int | None = None
    decimal_handling_mode: DecimalHandlingMode = Field(
        default="precise", alias="decimal.handling.mode"
    )

    @model_validator(mode="after")
    def _scale_only_for_decimals(self) -> Column:
        if self.type is ColumnKind.DECIMAL and self.scale is None:
            raise ValueError(f"decimal column {self.name!r} needs a scale")
        decimal_only = (self.scale, self.precision, self.decimal_handling_mode)
        if self.type is not ColumnKind.DECIMAL and decimal_only != (None, None, "precise"):
            raise ValueError(
                f"column {self.name!r} is not a decimal: no scale, precision or decimal mode"
            )
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
