"""A merge whose columns differ from the table's evolves it in the same write, on every sink:
added columns take the spec's default (else NULL) in the rows the batch does not touch, kept
columns are widened, dropped ones go, the newer-wins rules and the ledger hold as in any merge;
stored values that do not cast to a column's new type stop the write and leave the table as it
was."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from cdc.streams.protocol import TopicPartition
from replay.sinks.ledger import UncastableValuesError
from replay.sinks.protocol import OP_DELETE, OP_UPSERT, Sink, TableSpec

TP = TopicPartition("db.items", 0)
V1 = "id INT, qty INT, price DECIMAL(10,2), note STRING"
V2 = "id BIGINT, qty BIGINT, price DECIMAL(12,4), rank INT"  # widened, note dropped, rank added
META = "__op STRING, __pos STRING, __truncated BOOLEAN"


def _rows(sink: Sink, table: str) -> dict[Any, dict[str, Any]]:
    return {r["id"]: r.asDict() for r in sink.read(table).collect()}


def test_a_merge_with_new_columns_evolves_the_table(sink: Sink, spark: Any) -> None:
    first = [(1, 3, Decimal("1.50"), "a", OP_UPSERT, "01", False),
             (2, 4, Decimal("2.25"), "b", OP_UPSERT, "02", False),
             (3, 5, None, None, OP_UPSERT, "03", False)]  # fmt: skip
    assert sink.merge(TableSpec("items", ("id",)), spark.createDataFrame(first, f"{V1}, {META}"),
                      {TP: 3}) is not None  # fmt: skip
    second = [
        (2, 2**40, Decimal("0.1234"), 1, OP_UPSERT, "04", False),
        (3, None, None, None, OP_DELETE, "05", False),
        (4, 6, Decimal("9.0000"), 2, OP_UPSERT, "06", False),
        (1, 9, Decimal("9.9900"), 9, OP_UPSERT, "00", False),
    ]  # older than the stored row
    spec = TableSpec("items", ("id",), defaults={"rank": 7})
    entry = sink.merge(spec, spark.createDataFrame(second, f"{V2}, {META}"), {TP: 6})
    assert entry is not None and sink.positions("items") == {TP: 6}
    assert sink.read("items").columns == ["id", "qty", "price", "rank"]
    rows = _rows(sink, "items")
    assert rows == {
        1: {"id": 1, "qty": 3, "price": Decimal("1.5000"), "rank": 7},  # untouched: the default
        2: {"id": 2, "qty": 2**40, "price": Decimal("0.1234"), "rank": 1},
        4: {"id": 4, "qty": 6, "price": Decimal("9.0000"), "rank": 2},
    }
    assert str(rows[1]["price"]) == "1.5000"
    # the same batch again is covered by the ledger, evolved or not
    assert sink.merge(spec, spark.createDataFrame(second, f"{V2}, {META}"), {TP: 6}) is None


def test_stored_values_that_do_not_cast_stop_the_write(sink: Sink, spark: Any) -> None:
    first = [(1, "12", OP_UPSERT, "01", False), (2, "twelve", OP_UPSERT, "02", False)]
    spec = TableSpec("notes", ("id",))
    sink.merge(spec, spark.createDataFrame(first, f"id INT, note STRING, {META}"), {TP: 2})
    retyped = spark.createDataFrame([(3, 5, OP_UPSERT, "03", False)], f"id INT, note INT, {META}")
    with pytest.raises(UncastableValuesError, match="table notes: column note holds values"):
        sink.merge(spec, retyped, {TP: 3})
    assert sink.positions("notes") == {TP: 2}
    assert _rows(sink, "notes") == {1: {"id": 1, "note": "12"}, 2: {"id": 2, "note": "twelve"}}
