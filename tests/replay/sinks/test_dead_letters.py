"""The ``--on-error`` policy on a real sink: ``fail`` names the first bad record with the
parser's reason, ``dead-letter`` keeps every bad record with it, and a batch without bad
records is checked without the Python parser (no Python worker in the check's plan)."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.errors import ChangeEventError
from cdc.streams.protocol import TopicPartition
from replay.decode.changes import decode_native
from replay.decode.schema import TopicSchema
from replay.sinks.dead_letters import handle_bad_records
from replay.sinks.protocol import DEAD_LETTER_TABLE
from tests.replay.decode.conftest import as_records, published, raw_frame
from tests.replay.sinks.batches import SinkFactory

pytestmark = pytest.mark.integration

VALUE = published("sqlserver_1x_delete_decimal_base64_with_schema.json")
KEY = published("sqlserver_1x_delete_key_with_schema.json")
POSITIONS = {TopicPartition("emp", 0): 4}


def _bad(spark: Any, values: list[bytes]) -> Any:
    frame = raw_frame(spark, as_records("emp", [(KEY, v) for v in values]))
    return decode_native(frame, TopicSchema.from_record(VALUE, KEY)).bad


def _plan(frame: Any) -> str:
    return str(frame._jdf.queryExecution().executedPlan().toString())


def test_fail_names_the_first_bad_record_with_the_parsers_reason(
    spark: Any, make_sink: SinkFactory
) -> None:
    bad = _bad(spark, [VALUE, b"{not json", b"{nor this"])
    with pytest.raises(ChangeEventError) as raised:
        handle_bad_records(make_sink("duckdb"), bad, "fail", POSITIONS, "emp")
    message = str(raised.value)
    assert "not JSON" in message and "offset 1" in message and "emp" in message, message


def test_dead_letters_keep_every_bad_record_with_its_reason(
    spark: Any, make_sink: SinkFactory
) -> None:
    sink = make_sink("duckdb")
    bad = _bad(spark, [VALUE, b"{not json", VALUE, b"{nor this"])
    assert handle_bad_records(sink, bad, "dead-letter", POSITIONS, "emp") == 2
    rows = sorted(sink.read(DEAD_LETTER_TABLE).collect(), key=lambda r: r["offset"])
    assert [(r["topic"], r["offset"], r["target_table"]) for r in rows] == [
        ("emp", 1, "emp"),
        ("emp", 3, "emp"),
    ]
    assert all("not JSON" in r["reason"] for r in rows), [r["reason"] for r in rows]


def test_a_batch_without_bad_records_is_checked_without_python(
    spark: Any, make_sink: SinkFactory
) -> None:
    bad = _bad(spark, [VALUE, VALUE])
    assert "BatchEvalPython" in _plan(bad)  # the reasons need the Python parser...
    assert "BatchEvalPython" not in _plan(bad.select("topic", "partition", "offset"))
    assert handle_bad_records(make_sink("duckdb"), bad, "fail", POSITIONS, "emp") == 0
