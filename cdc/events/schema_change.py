"""Schema-change events: the DDL a connector saw, written to its ``<prefix>`` schema-change topic.

``tableChanges`` holds, per table touched, the change ``type`` (CREATE, ALTER, DROP), the table
``id`` and its full ``table`` description (columns, primary key). Debezium may leave it empty,
for instance for DDL it read during a snapshot.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cdc.events.source import AnySource


class TableChange(BaseModel):
    """One element of ``tableChanges``; ``table`` is kept as the JSON object Debezium wrote."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str
    id: str
    table: dict[str, Any] | None = None

    @property
    def primary_key_columns(self) -> tuple[str, ...]:
        """``table.primaryKeyColumnNames``: the key columns after the change."""
        names = (self.table or {}).get("primaryKeyColumnNames") or ()
        return tuple(str(name) for name in names)

    @property
    def column_names(self) -> tuple[str, ...]:
        """Names of ``table.columns`` in column ``position`` order."""
        columns = (self.table or {}).get("columns") or ()
        ordered = sorted(columns, key=lambda column: column.get("position", 0))
        return tuple(str(column["name"]) for column in ordered)


class SchemaChangeEvent(BaseModel):
    """A schema-change topic value: ``databaseName``, ``schemaName``, ``ddl``, ``tableChanges``."""

    model_config = ConfigDict(frozen=True, extra="allow", validate_by_name=True)

    kind: Literal["schema_change"] = "schema_change"
    source: AnySource
    ts_ms: int | None = None
    database_name: str | None = Field(default=None, alias="databaseName")
    schema_name: str | None = Field(default=None, alias="schemaName")
    ddl: str | None = None
    table_changes: tuple[TableChange, ...] = Field(default=(), alias="tableChanges")
