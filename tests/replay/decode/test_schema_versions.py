"""Records of one topic under several Connect schemas (a table altered mid-stream) decode each
by its own schema: widened types exact, an added column's default for older records, a dropped
column gone; a narrowing stops with an error naming topic, column and where, unless a rewrite
is allowed (then a value that does not cast is a bad record)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from cdc.events.decimal_codec import decimal_to_base64
from replay.decode import version_scan
from replay.decode.changes import decode_native
from replay.decode.schema import TopicSchema
from replay.decode.schema_versions import SchemaChangeError, schema_in_range
from replay.decode.version_scan import schema_hash
from replay.spark import F
from tests.replay.decode.conftest import as_records, raw_frame

pytestmark = pytest.mark.integration

TOPIC = "shop.public.items"


def _decimal(name: str, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1, "parameters": {"scale": str(scale)}, "field": name}  # fmt: skip


def _field(kind: str, name: str, optional: bool = True, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, **extra, "field": name}


def _record(
    fields: list[dict[str, Any]], offset: int, after: dict[str, Any]
) -> tuple[bytes, bytes]:
    row = {"type": "struct", "fields": fields, "optional": True, "name": f"{TOPIC}.Value"}
    schema = {"type": "struct", "name": f"{TOPIC}.Envelope", "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"},
        _field("struct", "source", False, fields=[]), _field("string", "op", False)]}  # fmt: skip
    source = {"version": "3.6.3.Final", "connector": "postgresql", "name": "shop", "ts_ms": 1,
              "snapshot": "false", "db": "db", "schema": "public", "table": "items",
              "txId": 600 + offset, "lsn": 1000 + offset}  # fmt: skip
    payload = {"before": None, "after": after, "source": source, "op": "c"}
    value = json.dumps({"schema": schema, "payload": payload}, separators=(",", ":"))
    return json.dumps({"id": after["id"]}).encode(), value.encode()


V1 = [_field("int32", "id", False), _field("int32", "qty", False), _decimal("price", 2),
      _field("string", "note")]  # fmt: skip
V2 = [_field("int32", "id", False), _field("int64", "qty", False), _decimal("price", 4),
      _field("int32", "rank", False, default=7)]  # fmt: skip


def _decode(spark: Any, pairs: list[tuple[bytes, bytes]], **options: Any) -> Any:
    frame = raw_frame(spark, as_records(TOPIC, pairs))
    base = TopicSchema.from_record(pairs[-1][1], pairs[-1][0], topic=TOPIC)
    schema = schema_in_range(TOPIC, lambda: frame, base, **options)
    return schema, decode_native(frame, schema)


def test_each_record_decodes_by_its_own_schema(spark: Any) -> None:
    pairs = [
        _record(V1, 0, {"id": 1, "qty": 3, "price": decimal_to_base64(Decimal("1.50"), 2),
                        "note": "a"}),
        _record(V1, 1, {"id": 2, "qty": 4, "price": None, "note": None}),
        _record(V2, 2, {"id": 2, "qty": 2**40, "price": decimal_to_base64(Decimal("0.1234"), 4),
                        "rank": 1}),
    ]  # fmt: skip
    schema, decoded = _decode(spark, pairs)
    assert [c.name for c in schema.columns] == ["id", "qty", "price", "rank"]  # note dropped
    assert decoded.bad.count() == 0
    rows = {(r["id"], r["__offset"]): r for r in decoded.good.collect()}
    first = rows[(1, 0)]
    assert (first["qty"], str(first["price"]), first["rank"]) == (3, "1.5000", 7)  # the default
    assert (rows[(2, 1)]["price"], rows[(2, 1)]["rank"]) == (None, 7)
    newest = rows[(2, 2)]
    assert (newest["qty"], str(newest["price"]), newest["rank"]) == (2**40, "0.1234", 1)


def test_a_narrowing_stops_the_run_naming_topic_column_and_where(spark: Any) -> None:
    narrow = [*V1[:2], _decimal("price", 1), V1[3]]
    pairs = [
        _record(V1, 0, {"id": 1, "qty": 3, "price": decimal_to_base64(Decimal("1.55"), 2)}),
        _record(narrow, 1, {"id": 2, "qty": 3, "price": decimal_to_base64(Decimal("1.5"), 1)}),
    ]
    with pytest.raises(SchemaChangeError) as caught:
        _decode(spark, pairs)
    message = str(caught.value)
    assert f"topic {TOPIC}: column price changed from decimal(38,2) to decimal(38,1)" in message
    assert "partition 0 offset 0" in message and "--allow-type-rewrite" in message


def test_an_allowed_rewrite_casts_older_values_and_rejects_what_does_not_cast(spark: Any) -> None:
    retyped = [*V1[:3], _field("int32", "note")]
    pairs = [
        _record(V1, 0, {"id": 1, "qty": 3, "price": None, "note": "12"}),
        _record(V1, 1, {"id": 2, "qty": 3, "price": None, "note": "twelve"}),
        _record(retyped, 2, {"id": 3, "qty": 3, "price": None, "note": 5}),
    ]
    with pytest.raises(SchemaChangeError, match="column note changed from string to int"):
        _decode(spark, pairs)
    _, decoded = _decode(spark, pairs, allow_rewrite=True)
    assert {r["id"]: r["note"] for r in decoded.good.collect()} == {1: 12, 3: 5}
    bad = decoded.bad.collect()
    assert [(r.offset, r.reason) for r in bad] == [
        (1, "payload.after.note: string value does not cast to int")
    ]


def _not_needed() -> Any:
    raise AssertionError("the driver's rows answer the scan: no Spark frame is built")


def test_the_driver_scan_of_a_small_range_finds_what_the_spark_scan_finds(spark: Any) -> None:
    v1 = [_record(V1, i, {"id": i, "qty": 1, "price": None, "note": None}) for i in range(3)]
    v2 = [_record(V2, i, {"id": i, "qty": 2, "price": None, "rank": 1}) for i in range(3, 5)]
    spaced_text = v2[0][1].decode().replace('{"schema":', '{ "schema" :', 1)
    spaced = spaced_text.replace(',"payload":', ',\n "payload":', 1).encode()
    pairs = [*v1, (v2[0][0], spaced), *v2[1:]]
    records = [*as_records(TOPIC, pairs), (TOPIC, 0, 9, b'{"id":1}', None, 9)]  # + a tombstone
    frame = raw_frame(spark, records)
    base = TopicSchema.from_record(pairs[-1][1], pairs[-1][0], topic=TOPIC)
    version_scan._known_hashes.clear()
    by_spark = version_scan.find_versions(lambda: frame, base)
    # V1, V2 and V2 written with spaces (hashed apart: what is hashed differs, the plan not)
    assert len(by_spark) == 3
    by_driver = version_scan.find_versions(_not_needed, base, rows=records)
    assert by_driver == by_spark  # same hashes, places and the very same decoding plans
    assert all(a.schema is b.schema for a, b in zip(by_driver, by_spark, strict=True))
    # Bytes that are not UTF-8: hashed as they are, as Spark hashes a binary cast to string;
    # written with spaces (the pattern runs on text), left to Spark's scan.
    not_utf8 = (TOPIC, 0, 8, b"k", b'{"schema":{"\xff"},"payload":{}}', 8)
    (spark_hash,) = raw_frame(spark, [not_utf8]).select(schema_hash(F.col("value"))).collect()
    found = version_scan._scan_rows([*records, not_utf8])
    assert found is not None and spark_hash[0] in {h for h, *_ in found}
    assert len(found) == 4 and {h for h, *_ in found} - {spark_hash[0]} == {
        v.hash for v in by_spark
    }
    spaced_not_utf8 = (TOPIC, 0, 8, b"k", b'{ "schema" :{"\xff"},"payload":{}}', 8)
    assert version_scan._scan_rows([*records, spaced_not_utf8]) is None


def test_a_schema_that_starts_like_the_previous_one_is_hashed_apart(spark: Any) -> None:
    first = b'{"schema":{"type":"struct"},"payload":{"op":"c"}}'
    longer = b'{"schema":{"type":"struct"},"optional":true},"payload":{"op":"c"}}'
    records = [(TOPIC, 0, o, b"k", v, o) for o, v in enumerate([first, longer, first, longer])]
    version_scan._known_hashes.clear()
    found = version_scan._scan_rows(records)
    hashes = raw_frame(spark, records).select(schema_hash(F.col("value"))).collect()
    assert found is not None
    assert sorted((h, a[2], b[2]) for h, a, b, _ in found) == sorted(
        [(hashes[0][0], 0, 2), (hashes[1][0], 1, 3)]
    )
    assert hashes[0][0] != hashes[1][0]
