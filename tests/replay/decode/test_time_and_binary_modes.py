"""Schemaless topics written with Debezium's ``time.precision.mode`` and
``binary.handling.mode``, decoded by the declared modes on both paths (Spark native, Python
fallback): the same values, and a value that does not fit its mode a bad row naming the field."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from cdc.events.declarations import declared_table
from replay.decode.changes import decode_native
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from tests.replay.decode.conftest import as_records, raw_frame

pytestmark = pytest.mark.integration

TOPIC = "shop.public.media"
COLUMNS = {
    "id": "int32", "t3": {"type": "time", "precision": 3}, "t6": "time",
    "ts0": {"type": "timestamp", "precision": 0}, "ts9": {"type": "timestamp", "precision": 9},
    "hex": {"type": "bytes", "binary.handling.mode": "hex"},
    "url": {"type": "bytes", "binary.handling.mode": "base64-url-safe"}, "b64": "bytes",
}  # fmt: skip


def _table(time_mode: str) -> Any:
    spec = {"key": ["id"], "time.precision.mode": time_mode, "binary.handling.mode": "base64",
            "columns": COLUMNS}  # fmt: skip
    return declared_table(TOPIC, spec)


def _event(offset: int, **after: Any) -> tuple[bytes, bytes]:
    source = {"version": "3.6.3.Final", "connector": "postgresql", "name": "shop", "ts_ms": 1,
              "snapshot": "false", "db": "db", "schema": "public", "table": "media",
              "txId": 600 + offset, "lsn": 1000 + offset}  # fmt: skip
    envelope = {"before": None, "after": {"id": offset, **after}, "source": source, "op": "c"}
    return json.dumps({"id": offset}).encode(), json.dumps(envelope).encode()


# (values, the field that must be reported bad, or "")
CASES: dict[str, list[tuple[dict[str, Any], str]]] = {
    "adaptive": [
        ({"t3": 86_399_123, "t6": 1_000_001, "ts0": 86_400_000, "ts9": 1_000_001_999}, ""),
        ({"hex": "00FF10", "url": "-_8=", "b64": "+/8="}, ""),
        ({"hex": "abc"}, "hex"),  # odd length
        ({"hex": "zz"}, "hex"),
        ({"url": "a$b="}, "url"),
        ({"b64": 5}, "b64"),
        ({"t6": "07:08:09"}, "t6"),
    ],
    "adaptive_time_microseconds": [({"t3": 1_000_001, "ts0": -1}, "")],
    "connect": [({"t3": 1_001, "t6": 1_001, "ts0": -1, "ts9": 1}, "")],
}
EXPECTED: dict[str, dict[int, dict[str, Any]]] = {
    "adaptive": {
        0: {"t3": 86_399_123_000, "t6": 1_000_001, "ts0": datetime(1970, 1, 2),
            "ts9": datetime(1970, 1, 1, 0, 0, 1, 1)},
        1: {"hex": b"\x00\xff\x10", "url": b"\xfb\xff", "b64": b"\xfb\xff"},
    },
    "adaptive_time_microseconds": {0: {"t3": 1_000_001,
                                       "ts0": datetime(1969, 12, 31, 23, 59, 59, 999000)}},
    "connect": {0: {"t3": 1_001_000, "t6": 1_001_000,
                    "ts0": datetime(1969, 12, 31, 23, 59, 59, 999000),
                    "ts9": datetime(1970, 1, 1, 0, 0, 0, 1000)}},
}  # fmt: skip


@pytest.mark.parametrize("python_path", [False, True])
@pytest.mark.parametrize("time_mode", sorted(CASES))
def test_time_and_binary_values_decode_by_their_mode(
    spark: Any, time_mode: str, python_path: bool
) -> None:
    cases = CASES[time_mode]
    frame = raw_frame(spark, as_records(TOPIC, [_event(i, **v) for i, (v, _) in enumerate(cases)]))
    decode = decode_python if python_path else decode_native
    decoded = decode(frame, TopicSchema.from_table(_table(time_mode)))
    good = {}
    for row in decoded.good.collect():
        values = {k: bytes(v) if isinstance(v, bytearray) else v for k, v in row.asDict().items()}
        good[values["id"]] = {k: v for k, v in values.items() if k in COLUMNS and k != "id"}
    expected = {
        i: {name: EXPECTED[time_mode][i].get(name) for name in COLUMNS if name != "id"}
        for i in EXPECTED[time_mode]
    }
    assert good == expected
    reasons = {r.offset: r.reason for r in decoded.bad.collect()}
    assert sorted(reasons) == [i for i, (_, field) in enumerate(cases) if field]
    for offset, reason in reasons.items():
        assert f".{cases[offset][1]}" in reason, (offset, reason)
