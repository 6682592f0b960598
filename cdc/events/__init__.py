"""Debezium change events: models, source positions, logical types, and the JSON serde.

Read records with ``parse_value``/``parse_key`` (or a ``ChangeEventReader``), which return a
``ChangeEvent``, ``Tombstone``, ``TransactionEvent`` or ``SchemaChangeEvent`` and raise
``cdc.errors.ChangeEventError`` on bad input. ExtractNewRecordState flat rows read as
``ChangeEvent`` with ``unwrapped=True`` (``cdc.events.unwrap`` says how). Order events of one key
with ``event.position()`` (``cdc.events.positions``). Write our own events with ``EventWriter``
from a ``TableSpec``. ``UNAVAILABLE`` marks a column value Debezium could not read.
"""

from cdc.events.columns import Column, ColumnKind, TableSpec
from cdc.events.envelope import (
    ChangeEvent,
    LogicalMessage,
    Op,
    ParsedValue,
    RecordKey,
    Row,
    Tombstone,
)
from cdc.events.positions import SourcePosition
from cdc.events.reader import ChangeEventReader, parse_key, parse_value
from cdc.events.schema_builder import envelope_schema, key_schema, value_schema
from cdc.events.schema_change import SchemaChangeEvent, TableChange
from cdc.events.source import (
    MySqlSource,
    PostgresSource,
    ReplicatorSource,
    SourceInfo,
    SqlServerSource,
)
from cdc.events.transaction import DataCollectionCount, TransactionBlock, TransactionEvent
from cdc.events.unavailable import UNAVAILABLE, Unavailable, fill_unavailable
from cdc.events.writer import EventWriter

__all__ = [
    "UNAVAILABLE",
    "ChangeEvent",
    "ChangeEventReader",
    "Column",
    "ColumnKind",
    "DataCollectionCount",
    "EventWriter",
    "LogicalMessage",
    "MySqlSource",
    "Op",
    "ParsedValue",
    "PostgresSource",
    "RecordKey",
    "ReplicatorSource",
    "Row",
    "SchemaChangeEvent",
    "SourceInfo",
    "SourcePosition",
    "SqlServerSource",
    "TableChange",
    "TableSpec",
    "Tombstone",
    "TransactionBlock",
    "TransactionEvent",
    "Unavailable",
    "envelope_schema",
    "fill_unavailable",
    "key_schema",
    "parse_key",
    "parse_value",
    "value_schema",
]
