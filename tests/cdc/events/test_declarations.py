"""Declared tables of schemaless topics from a ``--schema`` JSON file, and Debezium's
``decimal.handling.mode`` values (precise, string, double) read by their declared mode: a value
that does not fit is an error naming the field, never a silent null."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.errors import ChangeEventError, UsageError
from cdc.events.columns import ColumnKind
from cdc.events.declarations import load_declarations
from cdc.events.reader import ChangeEventReader

TOPIC = "fullfillment.inventory.products"
DECLARED = {
    TOPIC: {
        "key": ["id"],
        "decimal.handling.mode": "string",
        "columns": {
            "id": "int32",
            "name": "string",
            "price": {"type": "decimal", "scale": 2, "precision": 10},
            "weight": {"type": "decimal", "scale": 3, "decimal.handling.mode": "double"},
        },
    }
}


def _file(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "schema.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def _event(after: dict[str, Any]) -> bytes:
    source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "fullfillment",
              "ts_ms": 1, "snapshot": "false", "db": "postgres", "schema": "inventory",
              "table": "products", "txId": 602, "lsn": 34131104}  # fmt: skip
    envelope = {"before": None, "after": after, "source": source, "op": "c", "ts_ms": 2}
    return json.dumps(envelope).encode()


def test_a_schema_file_declares_columns_key_and_decimal_modes(tmp_path: Path) -> None:
    table = load_declarations(_file(tmp_path, DECLARED))[TOPIC]
    assert (table.server, table.table, table.key) == ("fullfillment.inventory", "products", ("id",))
    modes = {c.name: (c.type, c.decimal_handling_mode) for c in table.columns}
    assert modes["price"] == (ColumnKind.DECIMAL, "string")  # the topic's default
    assert modes["weight"] == (ColumnKind.DECIMAL, "double")  # the column's own
    assert modes["id"] == (ColumnKind.INT32, "precise")


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ("{not json", "not JSON"),
        ({TOPIC: {"columns": {"id": "integer"}}}, f"topic {TOPIC}, column id"),
        ({TOPIC: {"columns": {"p": {"type": "decimal"}}}}, "'p' needs a scale"),
        ({TOPIC: {"columns": {"id": "int32"}, "keys": ["id"]}}, "unknown settings ['keys']"),
        ({TOPIC: {"columns": {"id": "int32"}, "key": ["nope"]}}, "key columns ['nope']"),
        ({TOPIC: {"columns": {"n": {"type": "string", "decimal.handling.mode": "string"}}}},
         "not a decimal"),
        ({TOPIC: {"columns": {"p": {"type": "decimal", "scale": 2,
                                    "decimal.handling.mode": "text"}}}}, "column p"),
    ],
)  # fmt: skip
def test_a_bad_schema_file_names_the_file_topic_and_column(
    tmp_path: Path, document: Any, named: str
) -> None:
    path = _file(tmp_path, document)
    with pytest.raises(UsageError, match=r"schema\.json") as caught:
        load_declarations(path)
    assert named in str(caught.value)


def test_a_missing_schema_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope\.json: No such file"):
        load_declarations(tmp_path / "nope.json")


def test_string_and_double_decimals_read_by_their_declared_mode(tmp_path: Path) -> None:
    reader = ChangeEventReader(load_declarations(_file(tmp_path, DECLARED))[TOPIC])
    first = _after(reader, {"id": 1, "name": "a", "price": "1234.50", "weight": 0.1})
    assert first == {"id": 1, "name": "a", "price": Decimal("1234.50"), "weight": Decimal("0.100")}
    second = _after(reader, {"id": 2, "name": "b", "price": "-7", "weight": 2.0005})
    assert second["price"] == Decimal("-7.00")
    assert second["weight"] == Decimal("2.000")  # rounded half-even to the scale


def _after(reader: ChangeEventReader, after: dict[str, Any]) -> dict[str, Any]:
    event: Any = reader.parse_value(_event(after))
    return dict(event.after)


@pytest.mark.parametrize(
    ("after", "field"),
    [
        ({"id": 1, "price": "12.345", "weight": 1.0}, "price"),  # more decimals than the scale
        ({"id": 1, "price": "twelve", "weight": 1.0}, "price"),
        ({"id": 1, "price": "AeI=", "weight": 1.0}, "price"),  # base64: the precise mode's
        ({"id": 1, "price": 12.555, "weight": 1.0}, "price"),  # a number, more decimals
        ({"id": 1, "price": True, "weight": 1.0}, "price"),
        ({"id": 1, "price": "1.00", "weight": "1.0"}, "weight"),  # text where a number is
    ],
)
def test_a_value_not_in_its_declared_mode_is_an_error_naming_it(
    tmp_path: Path, after: dict[str, Any], field: str
) -> None:
    reader = ChangeEventReader(load_declarations(_file(tmp_path, DECLARED))[TOPIC])
    with pytest.raises(ChangeEventError, match=f"field after.{field}") as caught:
        reader.parse_value(_event(after), topic=TOPIC, partition=0, offset=9)
    assert f"topic {TOPIC}, partition 0, offset 9" in str(caught.value)
