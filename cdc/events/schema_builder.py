"""Kafka Connect schemas (JsonConverter format) for our own events, built from a ``TableSpec``.

Column kinds map to the Connect types a Debezium connector uses for them, so any Debezium
consumer can read our events: decimal -> ``org.apache.kafka.connect.data.Decimal`` (bytes, with
``parameters.scale``), date -> ``io.debezium.time.Date``, timestamp ->
``io.debezium.time.MicroTimestamp``, timestamp-tz -> ``io.debezium.time.ZonedTimestamp``,
time -> ``io.debezium.time.MicroTime``, json -> ``io.debezium.data.Json``,
uuid -> ``io.debezium.data.Uuid``. A column's value modes (``cdc.events.value_modes``) change
the type as the Debezium setting of that name does.
"""

from __future__ import annotations

from typing import Any

from cdc.events.columns import Column, ColumnKind, TableSpec
from cdc.events.value_modes import ENCODED_BYTES, temporal_encoding

_PHYSICAL = {
    ColumnKind.INT32: "int32",
    ColumnKind.INT64: "int64",
    ColumnKind.FLOAT64: "double",
    ColumnKind.BOOLEAN: "boolean",
    ColumnKind.STRING: "string",
    ColumnKind.BYTES: "bytes",
}
_LOGICAL = {
    ColumnKind.DECIMAL: ("bytes", "org.apache.kafka.connect.data.Decimal"),
    ColumnKind.TIMESTAMP_TZ: ("string", "io.debezium.time.ZonedTimestamp"),
    ColumnKind.JSON: ("string", "io.debezium.data.Json"),
    ColumnKind.UUID: ("string", "io.debezium.data.Uuid"),
}

_DECIMAL_PHYSICAL = {"precise": "bytes", "string": "string", "double": "double"}

REPLICATOR_SOURCE_SCHEMA_NAME = "cdc.replicator.Source"
SNAPSHOT_VALUES = (
    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
)


def _field(kind: str, field_name: str, optional: bool, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, **extra, "field": field_name}


_TEMPORAL = (ColumnKind.DATE, ColumnKind.TIME, ColumnKind.TIMESTAMP)


def column_schema(column: Column) -> dict[str, Any]:
    """The Connect field schema of one column."""
    if column.type is ColumnKind.BYTES and column.binary_handling_mode != "bytes":
        mode = {"binary.handling.mode": column.binary_handling_mode}
        return _field("string", column.name, column.optional, name=ENCODED_BYTES, parameters=mode)
    if column.type in _PHYSICAL:
        return _field(_PHYSICAL[column.type], column.name, column.optional)
    if column.type in _TEMPORAL:
        encoding = temporal_encoding(
            column.type.value, column.time_precision_mode, column.precision
        )
        return _field(encoding.physical, column.name, column.optional, name=encoding.logical,
                      version=1)  # fmt: skip
    physical, logical = _LOGICAL[column.type]
    extra: dict[str, Any] = {"name": logical, "version": 1}
    if column.type is ColumnKind.DECIMAL:
        # decimal.handling.mode string/double: the value is text/a number; the logical name and
        # scale stay, so readers still decode it to a DECIMAL of that scale
        physical = _DECIMAL_PHYSICAL[column.decimal_handling_mode]
        parameters = {"scale": str(column.scale)}
        if column.precision is not None:
            parameters["connect.decimal.precision"] = str(column.precision)
        extra["parameters"] = parameters
    return _field(physical, column.name, column.optional, **extra)


def value_schema(table: TableSpec) -> dict[str, Any]:
    """The row struct ``<server>.<table>.Value`` (optional, as in an envelope)."""
    fields = [column_schema(column) for column in table.columns]
    return {
        "type": "struct",
        "fields": fields,
        "optional": True,
        "name": f"{table.schema_prefix}.Value",
    }


def key_schema(table: TableSpec) -> dict[str, Any]:
    """The key struct ``<server>.<table>.Key`` of the key columns (all required)."""
    fields = [
        column_schema(column.model_copy(update={"optional": False})) for column in table.key_columns
    ]
    return {
        "type": "struct",
        "fields": fields,
        "optional": False,
        "name": f"{table.schema_prefix}.Key",
    }


REPLICATOR_SOURCE_FIELDS: tuple[dict[str, Any], ...] = (
    _field("string", "version", True),
    _field("string", "connector", False),
    _field("string", "name", True),
    _field("int64", "ts_ms", True),
    _field("int64", "ts_us", True),
    _field("int64", "ts_ns", True),
    _field(
        "string",
        "snapshot",
        True,
        name="io.debezium.data.Enum",
        version=1,
        parameters={"allowed": SNAPSHOT_VALUES},
    ),
    _field("string", "db", True),
    _field("string", "sequence", True),
    _field("string", "table", False),
    _field("string", "processor_id", False),
    _field("string", "input_topic", False),
    _field("int32", "input_partition", False),
    _field("int64", "input_offset_start", False),
    _field("int64", "input_offset_end", False),
    _field("string", "transaction_id", True),
    _field("int64", "commit_seq", False),
)
"""The ``source`` fields of our events, in order; they mirror ``ReplicatorSource``."""

TRANSACTION_BLOCK_FIELDS: tuple[dict[str, Any], ...] = (
    _field("string", "id", False),
    _field("int64", "total_order", False),
    _field("int64", "data_collection_order", False),
)


def envelope_schema(table: TableSpec) -> dict[str, Any]:
    """The value schema ``<server>.<table>.Envelope`` of our change events."""
    row = value_schema(table)
    return {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {
                "type": "struct",
                "fields": list(REPLICATOR_SOURCE_FIELDS),
                "optional": False,
                "name": REPLICATOR_SOURCE_SCHEMA_NAME,
                "field": "source",
            },
            _field("string", "op", False),
            _field("int64", "ts_ms", True),
            _field("int64", "ts_us", True),
            _field("int64", "ts_ns", True),
            {
                "type": "struct",
                "fields": list(TRANSACTION_BLOCK_FIELDS),
                "optional": True,
                "name": "event.block",
                "version": 1,
                "field": "transaction",
            },
        ],
        "optional": False,
        "name": f"{table.schema_prefix}.Envelope",
        "version": 1,
    }
