"""Bad input raises ``ChangeEventError`` naming the field and the record's origin."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from cdc.errors import ChangeEventError
from cdc.events import parse_key, parse_value
from cdc.events.json_text import dumps, loads

Published = Callable[[str], bytes]
SQLSERVER = "sqlserver_1x_delete_decimal_base64_with_schema.json"


def error_of(raw: Any, key: Any = None) -> ChangeEventError:
    with pytest.raises(ChangeEventError) as error:
        parse_value(raw, key=key, topic="redislabs.dbo.emp", partition=2, offset=41)
    assert (error.value.topic, error.value.partition, error.value.offset) == (
        "redislabs.dbo.emp",
        2,
        41,
    )
    return error.value


def edited(published: Published, edit: Callable[[dict[str, Any]], None]) -> str:
    """The SQL Server record (schema + payload) after ``edit``."""
    record = loads(published(SQLSERVER).decode())
    edit(record)
    return dumps(record)


def before_field(record: dict[str, Any], name: str) -> dict[str, Any]:
    """The schema of ``before.<name>`` in the SQL Server record."""
    fields = record["schema"]["fields"][0]["fields"]
    return next(field for field in fields if field["field"] == name)


@pytest.mark.parametrize("raw", [b"{not json", b"", b'{"schema": null, "payload": {', "[1, 2"])
def test_not_json(raw: bytes | str) -> None:
    error = error_of(raw)
    assert error.reason.startswith("not JSON") and error.field is None
    assert "topic redislabs.dbo.emp, partition 2, offset 41" in str(error)


def test_not_utf8_and_not_bytes() -> None:
    assert error_of(b"\xff\xfe{}").reason.startswith("not UTF-8")
    assert "expected bytes or text" in error_of(12).reason


def test_wrong_shape() -> None:
    assert error_of('{"schema": null, "payload": [1]}').field == "payload"
    assert error_of('{"op": "c", "source": "pg", "after": {}}').field == "source"
    assert error_of('{"hello": 1}').field == "op"


def test_wrong_shape_inside_a_row(published: Published) -> None:
    def after_is_text(record: dict[str, Any]) -> None:
        record["payload"]["before"] = "row"

    assert error_of(edited(published, after_is_text)).field == "payload.before"

    def empno_is_text(record: dict[str, Any]) -> None:
        record["payload"]["before"]["empno"] = "11"

    error = error_of(edited(published, empno_is_text))
    assert error.field == "payload.before.empno" and "integer" in error.reason


def test_unknown_op(published: Published) -> None:
    def op_x(record: dict[str, Any]) -> None:
        record["payload"]["op"] = "x"

    error = error_of(edited(published, op_x))
    assert error.field == "payload.op" and "'x'" in error.reason


@pytest.mark.parametrize(
    ("remove", "field"),
    [
        (lambda p: p.pop("source"), "payload.source"),
        (lambda p: p.pop("op"), "payload.op"),
        (lambda p: p["source"].pop("connector"), "payload.source.connector"),
        (lambda p: p["before"].pop("empno"), "payload.before.empno"),
        (lambda p: p["before"].update(empno=None), "payload.before.empno"),
    ],
)
def test_missing_required_field(
    published: Published, remove: Callable[[dict[str, Any]], None], field: str
) -> None:
    assert error_of(edited(published, lambda record: remove(record["payload"]))).field == field


def test_source_field_of_wrong_type(published: Published) -> None:
    def bad_serial(record: dict[str, Any]) -> None:
        record["payload"]["source"]["event_serial_no"] = "first"

    assert error_of(edited(published, bad_serial)).field == "payload.source.event_serial_no"


def test_after_must_match_op(published: Published) -> None:
    def create_without_after(record: dict[str, Any]) -> None:
        record["payload"]["op"] = "c"

    error = error_of(edited(published, create_without_after))
    assert error.field == "payload.after" and "needs an after row" in error.reason


def test_decimal_without_scale(published: Published) -> None:
    def drop_scale(record: dict[str, Any]) -> None:
        del before_field(record, "sal")["parameters"]["scale"]

    error = error_of(edited(published, drop_scale))
    assert error.field == "schema.before.sal" and "scale" in error.reason


@pytest.mark.parametrize("value", ["dzWUAA=", "dzWU AA==", "d*WUAA==", "", True, [1]])
def test_bad_base64_decimal(published: Published, value: Any) -> None:
    def bad_sal(record: dict[str, Any]) -> None:
        record["payload"]["before"]["sal"] = value

    assert error_of(edited(published, bad_sal)).field == "payload.before.sal"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string", "name": "io.debezium.data.Json"}, "{broken"),
        ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "2019-07-09T01:28:10"),
        ({"type": "string", "name": "io.debezium.data.Uuid"}, "not-a-uuid"),
        ({"type": "int32", "name": "io.debezium.time.Date"}, 10**9),
        ({"type": "int64", "name": "io.debezium.time.Timestamp"}, 2**62),
        ({"type": "int64", "name": "io.debezium.time.Timestamp"}, "1562630400000"),
        ({"type": "double"}, "1.5"),
        ({"type": "boolean"}, "true"),
    ],
)
def test_bad_logical_values(published: Published, schema: dict[str, Any], value: Any) -> None:
    def replace_job(record: dict[str, Any]) -> None:
        field = before_field(record, "job")
        field.clear()
        field.update(schema, optional=True, field="job")
        record["payload"]["before"]["job"] = value

    assert error_of(edited(published, replace_job)).field == "payload.before.job"


def test_bad_array_element_is_named_by_index(published: Published) -> None:
    def array_job(record: dict[str, Any]) -> None:
        field = before_field(record, "job")
        field.update(type="array", items={"type": "int32", "optional": False})
        record["payload"]["before"]["job"] = [1, None, 3]

    assert error_of(edited(published, array_job)).field == "payload.before.job[1]"


def test_unknown_schema_type(published: Published) -> None:
    def odd_type(record: dict[str, Any]) -> None:
        before_field(record, "job")["type"] = "varchar"

    assert error_of(edited(published, odd_type)).field == "schema.before.job"


def test_bad_keys(published: Published) -> None:
    key = loads(published("sqlserver_1x_delete_key_with_schema.json").decode())
    bad_key = copy.deepcopy(key)
    bad_key["payload"]["empno"] = "eleven"
    assert error_of(None, key=dumps(bad_key)).field == "key.payload.empno"
    assert error_of(None, key=b"not json").field == "key"
    assert error_of(published(SQLSERVER), key=b'{"schema": null, "payload": 11}').field == (
        "key.payload"
    )
    with pytest.raises(ChangeEventError) as error:
        parse_key(b"[", topic="k", partition=0, offset=3)
    assert (error.value.field, error.value.topic, error.value.offset) == ("key", "k", 3)


def test_avro_unions_that_do_not_fit_still_fail(published: Published) -> None:
    truncate = loads(published("mysql_2x_truncate_avro_json_rendering.json").decode())
    truncate["ts_ms"] = {"long": "soon"}
    error = error_of(dumps(truncate))
    assert error.field == "ts_ms"
