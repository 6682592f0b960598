"""Declared tables of schemaless topics, from a JSON file (``replicator replay --schema FILE``).

With ``value.converter.schemas.enable=false`` a change event carries no Connect schema, so the
columns, their types, the key and how Debezium encoded each value are declared::

    {
      "dbserver1.public.accounts": {
        "key": ["id"],
        "decimal.handling.mode": "string",
        "time.precision.mode": "connect",
        "binary.handling.mode": "hex",
        "columns": {
          "id": "int32",
          "owner": "string",
          "balance": {"type": "decimal", "scale": 2, "precision": 12},
          "fee": {"type": "decimal", "scale": 4, "decimal.handling.mode": "double"},
          "opened": {"type": "date", "optional": false},
          "updated": {"type": "timestamp", "precision": 3},
          "photo": "bytes"
        }
      }
    }

A column is a type name (``cdc.events.ColumnKind``) or an object with ``type``, ``optional``,
``scale``, ``precision`` (digits of a decimal; fractional-second digits of a time or timestamp)
and the modes; a mode set on the topic (``decimal.handling.mode``, ``time.precision.mode``,
``binary.handling.mode``, named as Debezium's connector settings) is the default of the columns
it applies to. The same objects in Python: :class:`TableSpec`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from cdc.errors import UsageError
from cdc.events.columns import Column, ColumnKind, TableSpec
from cdc.events.value_modes import BinaryHandlingMode, DecimalHandlingMode, TimePrecisionMode

_MODE_TYPES = {
    "decimal.handling.mode": {ColumnKind.DECIMAL.value},
    "time.precision.mode": {ColumnKind.DATE.value, ColumnKind.TIME.value,
                            ColumnKind.TIMESTAMP.value},
    "binary.handling.mode": {ColumnKind.BYTES.value},
}  # fmt: skip
"""Each topic-level mode and the column types it is the default of."""
_MODE_VALUES = {
    "decimal.handling.mode": get_args(DecimalHandlingMode),
    "time.precision.mode": get_args(TimePrecisionMode),
    "binary.handling.mode": get_args(BinaryHandlingMode),
}
_TOPIC_KEYS = {"key", "columns", *_MODE_TYPES}


def load_declarations(path: str | Path) -> dict[str, TableSpec]:
    """The declared table of each topic in the JSON file at ``path``; :class:`UsageError`
    naming the file, the topic and the column for anything wrong."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--schema {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"--schema {path}: not JSON ({exc})") from exc
    if not isinstance(document, dict) or not document:
        raise UsageError(f"--schema {path}: expected an object of topics -> declared tables")
    return {topic: declared_table(topic, spec, where=str(path)) for topic, spec in document.items()}


def declared_table(topic: str, spec: Any, *, where: str = "schema") -> TableSpec:
    """The :class:`TableSpec` of ``topic`` from its declaration object (see the module doc)."""
    at = f"{where}: topic {topic}"
    if not isinstance(spec, Mapping) or not isinstance(spec.get("columns"), Mapping):
        raise UsageError(f"{at}: expected an object with a 'columns' object")
    unknown = set(spec) - _TOPIC_KEYS
    if unknown:
        raise UsageError(f"{at}: unknown settings {sorted(unknown)} (known: {sorted(_TOPIC_KEYS)})")
    modes = {setting: spec[setting] for setting in _MODE_TYPES if setting in spec}
    for setting, mode in modes.items():
        if mode not in _MODE_VALUES[setting]:
            raise UsageError(f"{at}: {setting} {mode!r} is not one of {_MODE_VALUES[setting]}")
    columns = tuple(
        _column(name, column, modes, f"{at}, column {name}")
        for name, column in spec["columns"].items()
    )
    key = spec.get("key", [])
    if isinstance(key, str):
        key = [key]
    server, _, table = topic.rpartition(".")
    try:
        return TableSpec(server=server or topic, table=table, columns=columns, key=tuple(key))
    except ValidationError as exc:
        raise UsageError(f"{at}: {_reason(exc)}") from exc


def _column(name: str, column: Any, modes: Mapping[str, Any], at: str) -> Column:
    fields = {"type": column} if isinstance(column, str) else column
    if not isinstance(fields, Mapping):
        raise UsageError(f"{at}: expected a type name or an object, got {column!r}")
    fields = dict(fields)
    for setting, mode in modes.items():
        if fields.get("type") in _MODE_TYPES[setting]:
            fields.setdefault(setting, mode)
    try:
        return Column.model_validate({**fields, "name": name})
    except ValidationError as exc:
        raise UsageError(f"{at}: {_reason(exc)}") from exc


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{field + ': ' if field else ''}{message}"
