"""The decoder parses a compact value's payload alone (``value_prefix``): the same rows, the
same rejections, as parsing the whole value, also where a schema holds ``,"payload":``."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from replay.decode.changes import decode_native
from replay.decode.schema import TopicSchema, value_prefix
from tests.replay.decode.conftest import Record, as_records, by_offset, published, raw_frame
from tests.replay.decode.test_published import TOPICS


def _compact(document: Any) -> bytes:
    """JsonConverter's layout: no spaces, keys in the order given."""
    return json.dumps(document, separators=(",", ":")).encode()


def _with_payload_parameter(envelope: dict[str, Any]) -> dict[str, Any]:
    """``envelope`` with a key ``payload`` added to every ``parameters`` map of its schema."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if isinstance(out.get("parameters"), dict):
                out["parameters"] = {**out["parameters"], "payload": "x"}
            return out
        return [walk(v) for v in node] if isinstance(node, list) else node

    return {"schema": walk(envelope["schema"]), "payload": envelope["payload"]}


def test_numbers_and_keys_within_sparks_limits_keep_the_prefix() -> None:
    number = b"9" * 1000
    name = b"k" * 50_000
    value = b'{"schema":{"version":' + number + b',"' + name + b'":1},"payload":{}}'
    assert value_prefix(value) == value[: -len(b"{}}")].decode()


def test_the_prefix_ends_where_the_schema_does() -> None:
    envelope = {"schema": {"type": "struct", "parameters": {"a": "1", "payload": "2"}},
                "payload": {"op": "c"}}  # fmt: skip
    value = _compact(envelope)
    prefix = value_prefix(value)
    assert prefix is not None and value.decode().startswith(prefix)
    assert prefix.count(',"payload":') == 2 and prefix.endswith('}},"payload":')
    assert json.loads("{" + value.decode()[len(prefix) - len('"payload":') :]) == {
        "payload": {"op": "c"}
    }


@pytest.mark.parametrize(
    "value",
    [
        b'{"schema": {"type":"struct"},"payload":{}}',  # written with spaces
        b'{"payload":{},"schema":{"type":"struct"}}',  # payload first
        b'{"schema":{"type":"struct"}}',  # no payload
        b'{"schema":{"type":"struct","default":NaN},"payload":{}}',  # not JSON
        b'{"schema":{"type":"struct"',  # cut short
        b'{"schema":{"doc":"\xff"},"payload":{}}',  # not UTF-8
        b'{"op":"c","after":{}}',  # no schema
        # Past what Spark's JSON reader accepts (the whole value is corrupt there):
        b'{"schema":{"type":"struct","version":1' + b"0" * 1000 + b'},"payload":{}}',
        b'{"schema":{"type":"struct","doc":0.' + b"5" * 1000 + b'},"payload":{}}',
        b'{"schema":{"type":"struct","' + b"k" * 50_001 + b'":1},"payload":{}}',
        b'{"schema":{"type":"struct","doc":"' + b"d" * 1_000_000 + b'"},"payload":{}}',
    ],
)
def test_a_value_of_another_layout_has_no_prefix(value: bytes) -> None:
    assert value_prefix(value) is None


def _documents(topic: str) -> list[tuple[bytes | None, Any]]:
    return [(None if k is None else published(k), None if v is None else json.loads(published(v)))
            for v, k in TOPICS[topic]]  # fmt: skip


def _records(topic: str, parameter: bool) -> tuple[list[Record], bytes]:
    """The topic's published records, compact, then bad ones behind the newest's schema text;
    and the newest value."""
    pairs: list[tuple[bytes | None, bytes | None]] = []
    for key, document in _documents(topic):
        if document is not None and parameter:
            document = _with_payload_parameter(document)
        pairs.append((key, None if document is None else _compact(document)))
    key, newest = next((k, v) for k, v in reversed(pairs) if v is not None)
    prefix = value_prefix(newest)
    assert prefix is not None
    spaced = json.dumps(json.loads(newest)).encode()
    bad = [
        prefix + '{"op":"c","after":{}',  # cut short: not a valid record
        prefix + '{"op":"c","after":null,"source":null}}',  # no after row, no source
        prefix + '{"op":"z"}}',  # unknown op
        prefix + "null}",  # a null payload is skipped
        prefix + '"text"}',  # a payload that is not an object
    ]
    pairs += [(key, text.encode()) for text in bad] + [(key, spaced)]
    return as_records(topic, pairs), newest


def _decoded(spark: Any, records: list[Record], schema: TopicSchema) -> list[Any]:
    return by_offset(decode_native(raw_frame(spark, records), schema).all.collect())


@pytest.mark.integration
@pytest.mark.parametrize("parameter", [False, True], ids=["published", "payload-parameters"])
@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_the_payload_cut_decodes_as_the_whole_value(
    spark: Any, topic: str, parameter: bool
) -> None:
    records, newest = _records(topic, parameter)
    schema = TopicSchema.from_record(newest, records[-1][3])
    assert schema.value_prefix == value_prefix(newest)
    whole = replace(schema, value_prefix=None)
    cut_rows, whole_rows = _decoded(spark, records, schema), _decoded(spark, records, whole)
    assert cut_rows == whole_rows
    errors = [r["__error"] for r in cut_rows if r["__error"] is not None]
    assert len(errors) >= 3 and any("not a valid record" in e for e in errors)
    assert sum(r["__error"] is None for r in cut_rows) >= 2  # a good record and the spaced one
