"""Connect decimals decoded by pure Spark SQL equal the Python decoder, for any value that fits."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.events.decimal_codec import decimal_from_bytes, decimal_to_bytes
from cdc.events.declarations import declared_table
from replay.decode.changes import decode_native
from replay.decode.decimals import (
    UNSCALED_STEPS,
    decimal_from_base64,
    decimal_type,
    unscaled_from_base64,
    variable_scale_text,
)
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from replay.spark import F
from tests.replay.decode.conftest import as_records, raw_frame

pytestmark = pytest.mark.integration

LIMIT = 10**38 - 1
EDGES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1,
         2**64 - 1, 2**64, -(2**64), 2**126, -(2**126), LIMIT, -LIMIT, LIMIT - 1,
         1 - LIMIT]  # fmt: skip


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _minimal(unscaled: int) -> bytes:
    return decimal_to_bytes(Decimal(unscaled), 0)


def _decode_unscaled(spark: Any, texts: list[str]) -> list[Any]:
    frame = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i INT, s STRING")
    rows = frame.select("i", unscaled_from_base64(F.col("s")).alias("v")).collect()
    return [r.v for r in sorted(rows)]


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(
        st.one_of(st.integers(-LIMIT, LIMIT), st.sampled_from(EDGES), st.integers(-(2**80), 2**80)),
        min_size=20,
        max_size=60,
    ),
    padding=st.lists(st.integers(0, 3), min_size=60, max_size=60),
)
def test_base64_unscaled_values_match_the_python_decoder(
    spark: Any, values: list[int], padding: list[int]
) -> None:
    """Minimal two's complement (incl. 16-byte values) and sign-extended (padded) encodings."""
    texts = []
    for value, pad in zip(values, padding, strict=False):
        data = _minimal(value)
        texts.append(_b64((b"\xff" if value < 0 else b"\x00") * pad + data))
    decoded = _decode_unscaled(spark, texts)
    expected = [decimal_from_bytes(base64.b64decode(t), 0) for t in texts]
    assert decoded == expected


def test_out_of_range_and_invalid_inputs_give_null(spark: Any) -> None:
    too_big = [10**38, -(10**38), 2**127 - 1, -(2**127), 2**200]
    texts = [_b64(_minimal(v)) for v in too_big] + ["", "!!notbase64", _b64(b"\x00" * 20)]
    assert _decode_unscaled(spark, texts) == [None] * 7 + [Decimal(0)]


def test_scaled_decimals_and_variable_scale_text(spark: Any) -> None:
    cases = [(Decimal("-123456789012345678901234567890.1234"), 4, 38), (Decimal("10.0000"), 4, 19),
             (Decimal("-0.01"), 2, 5), (Decimal("99999.99"), 2, 7)]  # fmt: skip
    rows = [(i, _b64(decimal_to_bytes(d, s))) for i, (d, s, _) in enumerate(cases)]
    frame = spark.createDataFrame(rows, "i INT, s STRING")
    columns = [
        decimal_from_base64(F.col("s"), decimal_type(s, p)).alias(f"c{i}")
        for i, (_, s, p) in enumerate(cases)
    ]
    got = {r.i: r for r in frame.select("i", *columns).collect()}
    for i, (value, _, _) in enumerate(cases):
        assert got[i][f"c{i}"] == value
    # A value wider than its column's precision is null (reported as a bad value).
    narrow = frame.where("i < 2").select(decimal_from_base64(F.col("s"), decimal_type(4, 6)))
    assert {r[0] for r in narrow.collect()} == {None, Decimal("10.0000")}
    variable = [(Decimal("1E-7"), 7), (Decimal("-12.5"), 1), (Decimal("0E-3"), 3),
                (Decimal("1200"), -2)]  # fmt: skip
    structs = [(i, s, _b64(decimal_to_bytes(d.scaleb(s), 0))) for i, (d, s) in enumerate(variable)]
    vs = spark.createDataFrame(structs, "i INT, scale INT, value STRING")
    texts = vs.select("i", variable_scale_text(F.struct("scale", "value")).alias("t")).collect()
    assert [r.t for r in sorted(texts)] == [format(d, "f") for d, _ in variable]


def test_the_decoder_runs_the_steps_as_projections_and_equals_the_python_decoder(
    spark: Any,
) -> None:
    """A base64 decimal column through ``decode_native`` (its conversion in ``UNSCALED_STEPS``,
    each a projection of its own) equals ``decode_python`` at the edges, padded encodings and
    out-of-range values included (those are bad rows naming the field on both paths)."""
    table = declared_table("shop.public.ledger", {
        "key": ["id"],
        "columns": {"id": "int32", "amount": {"type": "decimal", "scale": 3, "precision": 38}},
    })  # fmt: skip
    values = [Decimal(f"{v}E-3") for v in EDGES]
    encoded = [decimal_to_bytes(d, 3) for d in values]
    encoded += [b"\x00\x00" + encoded[9], b"\xff" * 3 + encoded[12], _minimal(10**38)]
    pairs = []
    for i, data in enumerate(encoded):
        source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "shop",
                  "ts_ms": 1, "db": "db", "schema": "public", "table": "ledger",
                  "txId": 600 + i, "lsn": 1000 + i}  # fmt: skip
        after = {"id": i, "amount": _b64(data)}
        envelope = {"before": None, "after": after, "source": source, "op": "c", "ts_ms": 2}
        pairs.append((json.dumps({"id": i}).encode(), json.dumps(envelope).encode()))
    frame = raw_frame(spark, as_records("shop.public.ledger", pairs))
    schema = TopicSchema.from_table(table)
    native = decode_native(frame, schema)
    plan = native.good._jdf.queryExecution().optimizedPlan().toString()
    # Each step read more than once by the next stays a projection of its own (the last,
    # read once, may be inlined into the conversion's projection).
    assert all(f"__step1_{level}" in plan for level in range(len(UNSCALED_STEPS) - 1))
    results = []
    for decoded in (native, decode_python(frame, schema)):
        good = {r["id"]: r["amount"] for r in decoded.good.collect()}
        bad = {r["offset"]: r["reason"] for r in decoded.bad.collect()}
        results.append((good, sorted(bad)))
        assert all("amount" in reason for reason in bad.values())
    expected = {i: d for i, d in enumerate([*values, values[9], values[12]])}
    assert results[0] == results[1] == (expected, [len(encoded) - 1])
