"""The survey the compaction tasks tell (``task_survey``) against Spark's query over the same
decoded rows (``compaction.survey``), and the position check it rests on against the JVM's
``__pos``."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.streams.protocol import TopicPartition
from replay.decode.changes import ERROR, OFFSET, SOURCE, TXN, VALUE
from replay.decode.compaction import CANDIDATE, TOMBSTONED, Survey, survey
from replay.decode.fallback import SOURCE_NAMES, decoded_type, positioned
from replay.decode.key_tally import per_range_accumulator
from replay.decode.position import _BRANCHES, source_position
from replay.decode.schema import SOURCE_TYPE, TopicSchema
from replay.decode.survivor_rows import SurvivorDecoder
from replay.decode.task_survey import RangeSurvey, range_key, source_text, survey_taken
from replay.reading.plan import PartitionRange
from replay.sinks.protocol import POS
from replay.spark import F, T
from tests.replay.decode.conftest import ACCOUNTS, Changelog, account, published
from tests.replay.decode.test_bad_input import CASES, KEY
from tests.replay.decode.test_bad_input import VALUE as EMP_VALUE
from tests.replay.decode.test_published import TOPICS
from tests.replay.decode.test_survivor_rows import _compact

pytestmark = pytest.mark.integration


def _source(connector: str | None, **fields: Any) -> tuple[Any, ...]:
    return tuple(connector if n == "connector" else fields.get(n) for n in SOURCE_NAMES)


SURE = [
    _source("replicator", commit_seq=0),
    _source("replicator", commit_seq=2**63 - 1),
    _source("postgresql", lsn=33842376),
    _source("postgresql", lsn=33842376, sequence='["33842000","33842376"]'),
    _source("postgresql", sequence='[null,"33842376"]'),
    _source("postgresql", lsn=5, sequence="[]"),
    _source("mysql", file="mysql-bin.000003", pos=154, row=0),
    _source("mysql", file="", pos=0),
    _source("mariadb", file="b.12", pos=7),
    _source("sqlserver", commit_lsn="00000025:00000d98:0005", change_lsn=None),
    _source(
        "sqlserver",
        commit_lsn="00000025:00000d98:0005",
        event_serial_no=1,
        change_lsn="00000025:00000d98:0002",
    ),
    _source("oracle"),
    _source(None),
]
UNSURE = [
    _source("replicator"),
    _source("replicator", commit_seq=-1),
    _source("postgresql"),
    _source("postgresql", lsn=-1),
    _source("postgresql", lsn=5, sequence='["-3","5"]'),
    _source("postgresql", lsn=5, sequence='["16/B374D848","5"]'),
    _source("postgresql", sequence='["1",'),
    _source("postgresql", sequence='["1","99999999999999999999"]'),
    _source("mysql", file="mysql-bin.x", pos=1),
    _source("mysql", file=None, pos=1),
    _source("mysql", file="b.1", pos=None),
    _source("mysql", file="b.1", pos=1, row=-1),
    _source("sqlserver", commit_lsn=None),
    _source("sqlserver", commit_lsn="25:d98:5"),
    _source("sqlserver", commit_lsn="00000025:00000d98:0005", change_lsn="x"),
    _source("sqlserver", commit_lsn="00000025:00000d98:0005", event_serial_no=-2),
    # Past the field's Spark type: null (a LONG) or narrowed (``row``, an INT) on the JVM
    _source("replicator", commit_seq=2**63),
    _source("postgresql", lsn=2**63),
    _source("mysql", file="b.1", pos=2**63),
    _source("mysql", file="b.1", pos=1, row=2**31),
    _source("sqlserver", commit_lsn="00000025:00000d98:0005", event_serial_no=2**64),
    _source("postgresql", lsn=5, sequence='["1","5","7"]'),
    _source("postgresql", lsn=5, sequence="[1,5]"),
    _source("postgresql", lsn=5, sequence="[" * 100_000),
]


@pytest.mark.parametrize("connector", [None, "postgresql", "mysql", "replicator"])
def test_a_position_told_sure_is_never_null_on_the_jvm(spark: Any, connector: str | None) -> None:
    # Unverified, as ``decoded_survivors`` hands its rows over: a too large integer then
    # reaches the JVM as null, or narrowed
    sources = T.StructType([T.StructField("s", SOURCE_TYPE)])
    frame = spark.createDataFrame([(s,) for s in SURE + UNSURE], sources, verifySchema=False)
    part = source_position(F.col("s"), connector)
    found = frame.select(part.alias("part")).collect()
    for source, row in zip(SURE + UNSURE, found, strict=True):
        sure = source_text(source, connector) is not None
        if sure:  # and the text the tasks ship is the JVM's
            assert row["part"] is not None and row["part"] == source_text(source, connector)
        named = connector is None or source[0] == connector
        assert sure is (named and source in SURE), source


def test_every_connector_with_a_position_is_tried() -> None:
    assert {source[0] for source in SURE} >= set(_BRANCHES)


def _decoded(
    schema: TopicSchema, pairs: list[tuple[bytes | None, bytes]], ranges: int = 2, add: bool = True
) -> tuple[list[tuple[Any, ...]], list[RangeSurvey]]:
    """The pairs decoded as the tasks decode survivors, over ``ranges`` ranges: every third a
    key a tombstone followed, every fifth a truncate candidate."""
    decoder = SurvivorDecoder(schema)
    surveys = [RangeSurvey(schema) for _ in range(ranges)]
    rows = []
    for offset, (key, value) in enumerate(pairs):
        carried = (offset % 3 == 1, offset % 5 == 4)
        row = decoder.row(("t", offset % ranges, offset, key), value, carried)
        if row is not None:
            rows.append(surveys[offset % ranges].add(row) if add else row)
    return rows, surveys


def _both(spark: Any, schema: TopicSchema, pairs: list[tuple[bytes | None, bytes]]) -> Any:
    """Spark's survey of the rows the tasks ship (framed as ``decoded_survivors`` frames them)
    and the tasks' own."""
    rows, surveys = _decoded(schema, pairs)
    carry = [T.StructField(TOMBSTONED, T.BooleanType()), T.StructField(CANDIDATE, T.BooleanType())]
    rows_type = decoded_type(schema, carry)
    shipped = spark.createDataFrame(rows, rows_type, verifySchema=False)
    frame = positioned(shipped, schema, shipped=True)
    # The positions the tasks wrote are the JVM's, from the sources they did not ship
    unshipped = spark.createDataFrame(_decoded(schema, pairs, add=False)[0], rows_type)
    jvm = positioned(unshipped, schema).select(OFFSET, POS, ERROR).collect()
    assert sorted(jvm) == sorted(frame.select(OFFSET, POS, ERROR).collect())
    kept = F.when(F.col(ERROR).isNotNull(), F.col(VALUE))
    decoded = frame.withColumn(VALUE, kept).drop(SOURCE, TXN)
    findings = per_range_accumulator(spark)
    ranges = [_range(i) for i in range(len(surveys))]
    for r, range_survey in zip(ranges, surveys, strict=True):
        findings.add({range_key(r): range_survey.findings()})
    return survey(decoded, schema), survey_taken(findings, ranges), decoded


def _range(partition: int) -> PartitionRange:
    """A range of one offset of partition ``partition`` of topic ``t``."""
    return PartitionRange(TopicPartition("t", partition), 0, 1, 0, 1)


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_the_tasks_tell_the_survey_spark_finds_in_published_records(spark: Any, topic: str) -> None:
    pairs = [
        (None if k is None else published(k), _compact(published(v)))
        for v, k in TOPICS[topic]
        if v is not None
    ]
    schema = TopicSchema.from_record(pairs[-1][1], pairs[-1][0])
    spark_found, told, _ = _both(spark, schema, pairs)
    assert told == spark_found


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_the_tasks_tell_the_survey_of_our_changelog(spark: Any, schemas_enable: bool) -> None:
    from cdc.connector.spec import table_spec

    log = Changelog(schemas_enable=schemas_enable)
    first = account(1, score=None)
    for i in range(1, 9):
        log.upsert(None, account(i, name="ü" * i, blob=None if i % 2 else b"x" * i))
    log.upsert(first, account(1, balance=first["balance"] + 1, active=False))
    log.delete(account(2))
    pairs = [(r[3], r[4]) for r in log.records if r[4] is not None]
    spec = None if schemas_enable else table_spec("proc", ACCOUNTS)
    schema = TopicSchema.from_record(pairs[-1][1], pairs[-1][0], spec)
    spark_found, told, decoded = _both(spark, schema, pairs)
    assert told == spark_found and not told.rejected and told.live_bytes  # names not ASCII
    assert decoded.where(F.col(VALUE).isNotNull()).count() == 0


def test_rows_the_jvm_may_reject_keep_their_value_and_count_as_rejected(spark: Any) -> None:
    schema = TopicSchema.from_record(_compact(published(EMP_VALUE)), KEY)
    pairs = [(k, _compact(v)) for k, v, _ in CASES if v is not None]
    spark_found, told, decoded = _both(spark, schema, pairs)
    assert told.rejected and spark_found.rejected
    # The digests cover the record the JVM rejects (no position): "repeated" where Spark's
    # count finds the key once, never the other way
    assert told.repeated and told._replace(repeated=False) == spark_found._replace(repeated=False)
    rows, _ = _decoded(schema, pairs)
    kept = [row for row in rows if row[-3] is not None]  # (the raw value, carried after it)
    bad = decoded.where(F.col(ERROR).isNotNull())
    assert len(kept) == bad.count() and bad.where(F.col(VALUE).isNull()).count() == 0


def test_a_range_added_twice_counts_once(spark: Any) -> None:
    """Two tasks add the same range (as a retried task would): its findings count once, and
    the accumulator is emptied once read."""
    findings = per_range_accumulator(spark)
    same = {("t", 0, 0): (b"\x07" + b"\x00" * 7, True, False, False, True, 3, 120)}
    spark.sparkContext.parallelize([0, 1], 2).foreach(lambda _: findings.add(same))
    assert findings.value == same
    assert survey_taken(findings, [_range(0)]) == Survey(False, False, True, 3, 120, False, 1)
    assert findings.value == {}
