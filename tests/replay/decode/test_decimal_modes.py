"""Schemaless topics with Debezium's ``decimal.handling.mode`` string and double, decoded by the
declared mode on both paths (Spark native, Python fallback): exact text to DECIMAL, numbers
rounded to the scale, and a value that does not fit its mode a bad row naming the field."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from cdc.events.declarations import declared_table
from replay.decode.changes import decode_native
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from tests.replay.decode.conftest import as_records, raw_frame

pytestmark = pytest.mark.integration

TOPIC = "shop.public.prices"
TABLE = declared_table(TOPIC, {
    "key": ["id"],
    "columns": {
        "id": "int32",
        "price": {"type": "decimal", "scale": 2, "precision": 12,
                  "decimal.handling.mode": "string"},
        "rate": {"type": "decimal", "scale": 4, "precision": 10,
                 "decimal.handling.mode": "double"},
    },
})  # fmt: skip


def _event(offset: int, price: Any, rate: Any) -> tuple[bytes, bytes]:
    source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "shop",
              "ts_ms": 1, "snapshot": "false", "db": "db", "schema": "public",
              "table": "prices", "txId": 600 + offset, "lsn": 1000 + offset}  # fmt: skip
    after = {"id": offset, "price": price, "rate": rate}
    envelope = {"before": None, "after": after, "source": source, "op": "c", "ts_ms": 2}
    return json.dumps({"id": offset}).encode(), json.dumps(envelope).encode()


CASES: list[tuple[Any, Any, str]] = [
    ("1234567890.12", 0.0825, ""),  # 0
    ("-0.5", 12, ""),  # 1: fewer decimals than the scale; an integral number
    ("7", 1.23456, ""),  # 2: rounded half-even to 4 decimals
    ("12.345", 1.0, "price"),  # 3: more decimals than the scale
    ("twelve", 1.0, "price"),  # 4
    (12.5, 1.0, ""),  # 5: a JSON number where the mode says text: taken as its text
    ("1.00", "0.5", "rate"),  # 6: text where the mode says a number
    ("99999999999.00", 1.0, "price"),  # 7: beyond precision 12
]
EXPECTED = {
    0: (Decimal("1234567890.12"), Decimal("0.0825")),
    1: (Decimal("-0.50"), Decimal("12.0000")),
    2: (Decimal("7.00"), Decimal("1.2346")),
    5: (Decimal("12.50"), Decimal("1.0000")),
}


@pytest.mark.parametrize("python_path", [False, True])
def test_string_and_double_decimals_decode_by_their_mode(spark: Any, python_path: bool) -> None:
    pairs = [_event(i, price, rate) for i, (price, rate, _) in enumerate(CASES)]
    frame = raw_frame(spark, as_records(TOPIC, pairs))
    decode = decode_python if python_path else decode_native
    decoded = decode(frame, TopicSchema.from_table(TABLE))
    good = {r["id"]: (r["price"], r["rate"]) for r in decoded.good.collect()}
    assert good == EXPECTED
    reasons = {r.offset: r.reason for r in decoded.bad.collect()}
    assert sorted(reasons) == [i for i, case in enumerate(CASES) if case[2]]
    for offset, reason in reasons.items():
        assert f".{CASES[offset][2]}" in reason, (offset, reason)
