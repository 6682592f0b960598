"""A SQL projection's first build (the topic compacted, one write) against the same projection
applied batch by batch; the first build's fallback to batches where compaction dropped values
the newest images lack (unchanged TOAST); bad records in a first build."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.errors import ChangeEventError
from cdc.streams.local import LocalLog
from cdc.streams.protocol import TopicPartition
from projections import SqlProjection
from projections.change_ops import RowChange
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.sql_batches import SqlBatches
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import plan_replay
from replay.sinks.registry import open_sink
from tests.replay.decode.conftest import PLACEHOLDER, pg_update
from tests.replay.projection.workload import TOPIC, SalesTopic

pytestmark = pytest.mark.integration

PER_TITLE = SqlProjection.parse(
    "CREATE TABLE per_title AS SELECT title, COUNT(*) AS sales, SUM(seats) AS seats "
    "FROM movie_ticket_sales WHERE NOT refunded GROUP BY title"
)

BAD = b'{"payload": "not an envelope"}'


@pytest.fixture
def log(tmp_path: Path) -> Iterator[LocalLog]:
    stream = LocalLog.from_url(f"local://{tmp_path}/log")
    yield stream
    stream.close()


def _sale(sale_id: int, rng: random.Random) -> dict[str, Any]:
    return {"id": sale_id, "title": rng.choice(["Dune", "Heat", "Alien"]), "region": "eu",
            "total_ticket_value": Decimal("9.50"), "seats": rng.randrange(1, 9),
            "refunded": rng.random() < 0.2}  # fmt: skip


def _history(topic: SalesTopic, seed: int) -> None:
    """Inserts, many updates of few keys, deletes, a truncate and keys written after it."""
    rng = random.Random(seed)
    rows: dict[int, dict[str, Any]] = {}
    for round_ in range(6):
        changes = []
        for _ in range(40):
            sale_id = rng.randrange(25)
            old = rows.get(sale_id)
            if old is not None and rng.random() < 0.15:
                changes.append(RowChange("d", old, None))
                del rows[sale_id]
            else:
                rows[sale_id] = _sale(sale_id, rng)
                changes.append(RowChange("u" if old else "c", old, rows[sale_id]))
        if round_ == 2:
            changes.append(RowChange("t", None, None))
            rows.clear()
        topic.write(changes)


def _rows(engine: ProjectionEngine, job: ProjectionJob) -> list[tuple[Any, ...]]:
    plan, _ = engine.sql_plan(job)
    return sorted(engine.store.query(plan.visible_sql(engine.store.dialect), plan.tables))


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_a_first_build_equals_the_projection_applied_batch_by_batch(
    log: LocalLog, spark: Any, tmp_path: Path, kind: str
) -> None:
    topic = SalesTopic(log)
    _history(topic, seed=3)
    topic.write([RowChange("c", None, _sale(99, random.Random(1)))])  # newest: a keyed row
    suffix = ".duckdb" if kind == "duckdb" else ""
    first, batched = (open_sink(f"{kind}://{tmp_path}/{n}{suffix}", spark) for n in "ab")
    try:
        built = ProjectionEngine(spark, log, first)
        job = ProjectionJob(PER_TITLE, TOPIC, batch_offsets=40)
        result = built.run(job)
        assert len(result.entries) == 1, "a first build is one write"
        assert result.entries[0].positions == {
            TopicPartition(TOPIC, p): log.bounds(TOPIC, p).end for p in range(2)
        }
        # The reference: a first build of each partition's first record, then batches.
        engine = ProjectionEngine(spark, log, batched)
        head = {TopicPartition(TOPIC, p): 1 for p in range(2)}
        engine.run(ProjectionJob(PER_TITLE, TOPIC, stop=Bound(BoundKind.OFFSETS, offsets=head)))
        assert len(engine.run(job).entries) >= 4
        expected = _rows(engine, job)
        assert expected and _rows(built, job) == expected
        assert expected == _per_title({k[0]: row for k, row in topic.rows.items()})
        assert built.run(job).mode == "up-to-date"
    finally:
        topic.close()
        first.close()
        batched.close()


def test_a_first_build_lacking_unchanged_toast_values_goes_by_batches(
    log: LocalLog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest update of row 101 left its TOAST column out: the value is in the row's older
    record, which compaction drops, so the first build applies the topic as batches."""
    topic = "pg.public.products"
    log.ensure_topic(topic, 1)
    writer = log.writer("feeder")
    writer.begin()
    for row, lsn, text, name in [(101, 100, "first text", "a"), (102, 150, "kept", "x"),
                                 (101, 200, PLACEHOLDER, "b")]:  # fmt: skip
        writer.send(topic, json.dumps({"id": row}).encode(), pg_update(lsn, row, text, name))
    writer.commit()
    writer.close()
    calls: list[tuple[str, Any]] = []
    batch, first = SqlBatches.apply, SqlBatches.first_build

    def applied(self: SqlBatches, *args: Any) -> Any:
        calls.append(("apply", None))
        return batch(self, *args)

    def built(self: SqlBatches, *args: Any) -> Any:
        calls.append(("first_build", first(self, *args)))
        return calls[-1][1]

    monkeypatch.setattr(SqlBatches, "apply", applied)
    monkeypatch.setattr(SqlBatches, "first_build", built)
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", spark)
    try:
        engine = ProjectionEngine(spark, log, sink)
        projection = SqlProjection.parse(
            "CREATE TABLE texts AS SELECT description, COUNT(*) AS n FROM products "
            "GROUP BY description"
        )
        job = ProjectionJob(projection, topic)
        assert len(engine.run(job).entries) == 1
        assert calls == [("first_build", None), ("apply", None)]
        assert _rows(engine, job) == [("first text", 1), ("kept", 1)]
    finally:
        sink.close()


def _per_title(rows: dict[int, dict[str, Any]]) -> list[tuple[Any, ...]]:
    """``PER_TITLE`` over ``rows``, in Python."""
    out: dict[str, tuple[int, int]] = {}
    for row in rows.values():
        if not row["refunded"]:
            n, seats = out.get(row["title"], (0, 0))
            out[row["title"]] = (n + 1, seats + row["seats"])
    return sorted((title, n, seats) for title, (n, seats) in out.items())


def test_a_first_build_skips_a_superseded_bad_record_and_fails_on_a_kept_one(
    log: LocalLog, spark: Any, tmp_path: Path
) -> None:
    """As a replay's rebuild: compaction never reaches a bad record a later record of its key
    replaces; one it keeps fails the build, naming where it is, and nothing is written."""
    topic = SalesTopic(log, partitions=1)
    rng = random.Random(5)
    rows = {i: {**_sale(i, rng), "refunded": False} for i in range(3)}
    topic.write([RowChange("c", None, row) for row in rows.values()])
    keys = {json.loads(r.value or b"{}")["payload"]["after"]["id"]: r.key
            for r in log.read(TOPIC, 0, 0)}  # fmt: skip

    def bad(key: bytes | None) -> int:
        writer = log.writer("bad-feeder")
        writer.begin()
        writer.send(TOPIC, key, BAD, partition=0)
        writer.commit()
        writer.close()
        return max(r.offset for r in log.read(TOPIC, 0, 0) if r.value == BAD)

    bad(keys[1])
    rows[1] = {**rows[1], "seats": 42}
    topic.write([RowChange("u", None, rows[1])])
    sink, other = (open_sink(f"duckdb://{tmp_path}/{n}.duckdb", spark) for n in ("a", "b"))
    try:
        engine = ProjectionEngine(spark, log, sink)
        job = ProjectionJob(PER_TITLE, TOPIC)
        assert len(engine.run(job).entries) == 1
        assert _rows(engine, job) == _per_title(rows)
        offset = bad(keys[2])
        topic.write([RowChange("u", None, {**rows[0], "seats": 7})])  # the schema's sample
        with pytest.raises(ChangeEventError, match=f"partition 0, offset {offset}"):
            ProjectionEngine(spark, log, other).run(job)
        assert other.tables() == []
    finally:
        topic.close()
        sink.close()
        other.close()


def _sent(log: LocalLog, sale_id: int) -> list[Any]:
    """The records of sale ``sale_id`` on ``TOPIC``, oldest first."""
    found = []
    for partition in range(log.partition_count(TOPIC)):
        for record in log.read(TOPIC, partition, 0):
            payload = json.loads(record.value or b"null") or {}
            image = payload.get("payload", {}).get("after") or payload.get("payload", {}).get(
                "before"
            )
            if image and image["id"] == sale_id:
                found.append(record)
    return found


def test_a_key_deleted_in_a_first_build_stays_deleted_when_an_older_change_comes_later(
    log: LocalLog, spark: Any, tmp_path: Path
) -> None:
    """The first build leaves the mirror a tombstone for a deleted key, as a batch does: the
    key's older insert, arriving later in the other partition (a repartitioned topic), is
    older than the delete and changes nothing."""
    topic = SalesTopic(log)
    rng = random.Random(9)
    dune, heat = {**_sale(1, rng), "title": "Dune"}, {**_sale(2, rng), "title": "Heat"}
    topic.write([RowChange("c", None, dune), RowChange("c", None, heat)])
    topic.write([RowChange("d", dune, None)])
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", spark)
    try:
        engine = ProjectionEngine(spark, log, sink)
        job = ProjectionJob(PER_TITLE, TOPIC)
        assert engine.run(job).mode == "rebuild"
        expected = _per_title({2: heat})
        assert _rows(engine, job) == expected
        insert = _sent(log, 1)[0]
        writer = log.writer("repartitioned")
        writer.begin()
        writer.send(TOPIC, insert.key, insert.value, partition=1 - insert.partition)
        writer.commit()
        writer.close()
        assert engine.run(job).mode == "catch-up"
        assert _rows(engine, job) == expected
    finally:
        topic.close()
        sink.close()


def test_a_first_build_over_a_projection_built_meanwhile_applies_as_a_batch(
    log: LocalLog, spark: Any, tmp_path: Path
) -> None:
    """Two followers of one projection: one builds it to some positions, the other, which
    planned its first build from the log start before, writes it after. Its batch (newest
    change of every key, deletes and the truncate included) brings the projection to the end
    as a batch over those positions would."""
    topic = SalesTopic(log)
    rng = random.Random(4)
    rows = {i: _sale(i, rng) for i in range(12)}
    topic.write([RowChange("c", None, row) for row in rows.values()])
    sink = open_sink(f"duckdb://{tmp_path}/out.duckdb", spark)
    try:
        engine = ProjectionEngine(spark, log, sink)
        job = ProjectionJob(PER_TITLE, TOPIC)
        target, schema = engine.sql_target(job), engine.schema(TOPIC)
        start = plan_replay(log, [TOPIC], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
        assert engine.run(job).mode == "rebuild"  # the first follower
        topic.write([RowChange("d", rows[i], None) for i in (0, 1)])
        assert engine.sql.first_build(target, schema, start, 10**6) == []  # covered: skipped
        late = plan_replay(log, [TOPIC], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
        topic.write([RowChange("t", None, None)])
        after = {i: _sale(i, rng) for i in (20, 21)}
        topic.write([RowChange("c", None, row) for row in after.values()])
        whole = plan_replay(log, [TOPIC], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
        assert len(engine.sql.first_build(target, schema, late, 10**6) or []) == 1
        assert _rows(engine, job) == _per_title({i: r for i, r in rows.items() if i > 1})
        assert len(engine.sql.first_build(target, schema, whole, 10**6) or []) == 1
        assert _rows(engine, job) == _per_title(after)
        assert engine.run(job).mode == "up-to-date"
    finally:
        topic.close()
        sink.close()
