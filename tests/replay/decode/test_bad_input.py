"""Records that are not valid JSON or not valid change events are returned as bad rows with a
reason and their origin, on both paths, never dropped silently."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replay.decode.changes import BAD_COLUMNS, decode_native
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from tests.replay.decode.conftest import as_records, published, raw_frame

pytestmark = pytest.mark.integration

VALUE = "sqlserver_1x_delete_decimal_base64_with_schema.json"
KEY = published("sqlserver_1x_delete_key_with_schema.json")


def _variant(change: Any) -> bytes:
    document = json.loads(published(VALUE))
    change(document["payload"])
    return json.dumps(document).encode()


def _set(path: str, value: Any) -> Any:
    def change(payload: dict[str, Any]) -> None:
        *parents, name = path.split(".")
        for parent in parents:
            payload = payload[parent]
        payload[name] = value

    return change


CASES: list[tuple[bytes | None, bytes | None, str]] = [
    (KEY, published(VALUE), ""),  # 0: good
    (KEY, b"{not json", "not JSON"),  # 1
    (KEY, b'{"schema": null, "payload": {"foo": 1}}', "op"),  # 2: not an envelope
    (KEY, _variant(_set("op", "x")), "op"),  # 3
    (KEY, _variant(_set("op", "c")), "after"),  # 4: a create without its after image
    (KEY, _variant(_set("before.sal", "%%%")), "sal"),  # 5: bad base64 decimal
    (KEY, _variant(_set("before.empno", None)), "empno"),  # 6: required column null
    (KEY, _variant(_set("before.empno", "eleven")), "empno"),  # 7: wrong JSON type
    (KEY, published("pg_txn_begin_schema_null.json"), "change event"),  # 8: not a change
    (b"{nope", _variant(_set("before", None)), "key"),  # 9: bad key, needed for the delete
    (KEY, _variant(_set("source.commit_lsn", None)), "position"),  # 10: no position
    (KEY, None, ""),  # 11: a tombstone: neither good nor bad
]


@pytest.mark.parametrize("python_path", [False, True])
def test_bad_records_come_back_with_reason_and_origin(spark: Any, python_path: bool) -> None:
    frame = raw_frame(spark, as_records("emp", [(k, v) for k, v, _ in CASES]))
    schema = TopicSchema.from_record(published(VALUE), KEY)
    decoded = (decode_python if python_path else decode_native)(frame, schema)
    assert [r["__offset"] for r in decoded.good.collect()] == [0]
    bad = decoded.bad
    assert tuple(bad.columns) == BAD_COLUMNS
    reasons = {r.offset: r for r in bad.collect()}
    assert sorted(reasons) == list(range(1, 11))
    for offset, row in reasons.items():
        expected = CASES[offset][2]
        assert expected.lower() in row.reason.lower(), (offset, row.reason)
        assert (row.topic, row.partition, row.value) == ("emp", 0, CASES[offset][1])
