"""The capture's lifecycle: resuming from its stored offsets, and failing with one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.errors import SetupError
from cdc.runtime import pg_client
from cdc.runtime.debezium_capture import DebeziumCapture
from cdc.streams.kafka_stream import KafkaEventStream
from tests.cdc.runtime.debezium_json import decimal_value, read_topic

pytestmark = pytest.mark.integration


def test_capture_without_schemas_resumes_after_restart_without_a_new_snapshot(
    pg_database: str, start_capture: Callable[..., DebeziumCapture], tmp_path: Path
) -> None:
    with pg_client.connect(pg_database) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(12,2))")
        conn.execute(
            "INSERT INTO items SELECT g, 'item ' || g, g * 1.25 FROM generate_series(1, 5) g"
        )
        schemaless = {"schemas_enable": False, "work_dir": tmp_path / "capture"}
        capture = start_capture(pg_database, ("public.items",), **schemaless)
        capture.wait_caught_up()
        capture.stop()
        conn.execute("INSERT INTO items SELECT g, 'new ' || g, 9.99 FROM generate_series(6, 8) g")
        conn.execute("UPDATE items SET price = 0.01 WHERE id = 2")
        conn.execute("DELETE FROM items WHERE id = 3")
        prefix = capture.options.topic_prefix
        capture = start_capture(pg_database, ("public.items",), topic_prefix=prefix, **schemaless)
        capture.wait_caught_up()
    stream = KafkaEventStream(capture.options.bootstrap)
    records = read_topic(stream, capture.options.table_topic("public.items"))
    stream.close()
    values = [None if r.value is None else json.loads(r.value) for r in records]
    assert [v and v["op"] for v in values] == ["r"] * 5 + ["c"] * 3 + ["u", "d", None]
    assert all("schema" not in v for v in values if v)
    assert json.loads(records[0].key or b"") == {"id": 1}
    assert values[8] is not None and values[9] is not None
    assert decimal_value(values[8]["after"]["price"]) == Decimal("0.01")
    assert values[9]["before"]["id"] == 3


def test_a_failing_connector_is_a_one_line_setup_error(
    pg_database: str, start_capture: Callable[..., DebeziumCapture]
) -> None:
    with pytest.raises(SetupError) as failure:
        wrong = {"database.password": "wrong"}
        capture = start_capture(pg_database, ("public.none",), properties=wrong)
        capture.wait_caught_up(timeout_s=60)
    message = str(failure.value)
    assert "password authentication failed" in message and "log:" in message
    assert "\n" not in message
