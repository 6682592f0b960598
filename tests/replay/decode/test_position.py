"""``__pos`` text order equals ``SourcePosition`` order, then the stream position's."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.events.source import source_model
from replay.decode.position import event_position
from replay.decode.schema import SOURCE_TYPE
from replay.spark import F, T

pytestmark = pytest.mark.integration

_SMALL = st.integers(0, 3)
_LSN = st.one_of(_SMALL, st.integers(0, 2**63 - 1))


def _lsn_text(value: int, slashed: bool) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}" if slashed else str(value)


@st.composite
def _postgres(draw: st.DrawFn) -> dict[str, Any]:
    lsn, last, slashed = draw(_LSN), draw(st.one_of(st.none(), _LSN)), draw(st.booleans())
    sequence = None
    if draw(st.booleans()):
        first = "null" if last is None else f'"{_lsn_text(last, slashed)}"'
        sequence = f'[{first},"{_lsn_text(lsn, slashed)}"]'
    own = lsn if sequence is None or draw(st.booleans()) else None
    return {"connector": "postgresql", "lsn": own, "sequence": sequence}


@st.composite
def _mysql(draw: st.DrawFn) -> dict[str, Any]:
    number = draw(st.one_of(st.none(), st.integers(0, 999_999)))
    file = "" if number is None else f"mysql-bin.{number:06d}"
    pos = draw(st.one_of(_SMALL, st.integers(0, 2**62)))
    return {
        "connector": "mysql",
        "file": file,
        "pos": pos,
        "row": draw(st.one_of(st.none(), _SMALL)),
    }


def _sqlserver_lsn(value: int) -> str:
    return f"{value >> 48:08x}:{(value >> 16) & 0xFFFFFFFF:08x}:{value & 0xFFFF:04x}"


@st.composite
def _sqlserver(draw: st.DrawFn) -> dict[str, Any]:
    lsn = st.one_of(_SMALL, st.integers(0, 2**80 - 1))
    change = draw(st.one_of(st.none(), lsn))
    return {
        "connector": "sqlserver",
        "commit_lsn": _sqlserver_lsn(draw(lsn)),
        "change_lsn": None if change is None else _sqlserver_lsn(change).upper(),
        "event_serial_no": draw(st.one_of(st.none(), _SMALL)),
    }


@st.composite
def _replicator(draw: st.DrawFn) -> dict[str, Any]:
    end = draw(st.one_of(_SMALL, st.integers(0, 2**62)))
    return {
        "connector": "replicator", "table": "t", "processor_id": "p", "input_topic": "in",
        "input_partition": 0, "input_offset_start": 0, "input_offset_end": end,
        "commit_seq": draw(st.one_of(_SMALL, st.integers(0, 2**62))),
    }  # fmt: skip


SOURCES = {"postgresql": _postgres(), "mysql": _mysql(), "sqlserver": _sqlserver(),
           "replicator": _replicator()}  # fmt: skip
STREAM = st.tuples(st.integers(0, 2), st.one_of(_SMALL, st.integers(0, 2**62)))


def _check_order(spark: Any, sources: list[dict[str, Any]], streams: list[tuple[int, int]]) -> None:
    rows = [(i, *stream, tuple(s.get(n) for n in SOURCE_TYPE.fieldNames()))
            for i, (s, stream) in enumerate(zip(sources, streams, strict=False))]  # fmt: skip
    schema = T.StructType(
        [T.StructField("i", T.IntegerType()), T.StructField("p", T.IntegerType()),
         T.StructField("o", T.LongType()), T.StructField("s", SOURCE_TYPE)]
    )  # fmt: skip
    frame = spark.createDataFrame(rows, schema)
    got = frame.select("i", event_position(F.col("s"), F.col("p"), F.col("o")).alias("pos"))
    texts = {r.i: r.pos for r in got.collect()}
    keys = [(source_model(s["connector"]).model_validate(s).position().order, *stream)
            for s, stream in zip(sources, streams, strict=False)]  # fmt: skip
    for i in texts:
        for j in texts:
            assert (texts[i] < texts[j]) == (keys[i] < keys[j]), (sources[i], sources[j])


@pytest.mark.parametrize("connector", sorted(SOURCES))
def test_pos_text_sorts_like_the_source_position(spark: Any, connector: str) -> None:
    @settings(max_examples=4, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
    @given(st.lists(st.tuples(SOURCES[connector], STREAM), min_size=10, max_size=60))
    def check(events: list[tuple[dict[str, Any], tuple[int, int]]]) -> None:
        _check_order(spark, [e[0] for e in events], [e[1] for e in events])

    check()


def test_unreadable_positions_are_null(spark: Any) -> None:
    bad: list[dict[str, Any]] = [
        {"connector": "postgresql"},
        {"connector": "mysql", "file": "bin.x", "pos": 1},
        {"connector": "sqlserver", "commit_lsn": "nope"},
        {"connector": "replicator", "commit_seq": -1},
    ]
    rows = [(i, tuple(s.get(n) for n in SOURCE_TYPE.fieldNames())) for i, s in enumerate(bad)]
    schema = T.StructType([T.StructField("i", T.IntegerType()), T.StructField("s", SOURCE_TYPE)])
    frame = spark.createDataFrame(rows, schema)
    got = frame.select(event_position(F.col("s"), F.lit(0), F.lit(1).cast("bigint"))).collect()
    assert [r[0] for r in got] == [None] * 4
