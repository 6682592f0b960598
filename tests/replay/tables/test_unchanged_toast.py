"""A full rebuild of a PostgreSQL topic whose newest update of a row left an unchanged TOAST
column out (Debezium's unavailable-value placeholder): the value comes from the row's older
record, which the compacting fast path drops, so such a rebuild decodes the range as one batch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from replay.decode.compaction import decoded_latest, latest_records, rebuild_table, survey
from replay.decode.schema import TopicSchema
from replay.sinks.registry import open_sink
from replay.tables.engine import ReplayEngine, ReplayJob
from tests.replay.decode.conftest import PLACEHOLDER, as_records, pg_update, raw_frame

pytestmark = pytest.mark.integration

TOPIC = "pg.public.products"


def _records() -> list[tuple[bytes, bytes]]:
    updates = [
        (101, 100, "first text", "a"),
        (102, 150, "kept", "x"),
        (101, 200, PLACEHOLDER, "b"),  # TOAST unchanged: "first text" stays
        (103, 300, PLACEHOLDER, "c"),  # no older record holds it: null
    ]
    return [
        (json.dumps({"id": row}).encode(), pg_update(lsn, row, text, name))
        for row, lsn, text, name in updates
    ]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[LocalLog]:
    stream = LocalLog.from_url(f"local://{tmp_path}/log")
    stream.ensure_topic(TOPIC, 1)
    writer = stream.writer("feeder")
    writer.begin()
    for key, value in _records():
        writer.send(TOPIC, key, value)
    writer.commit()
    writer.close()
    yield stream
    stream.close()


def test_compaction_finds_the_newest_images_that_lack_a_value(spark: Any) -> None:
    records = _records()
    schema = TopicSchema.from_record(records[-1][1], records[-1][0])
    full, whole = (
        decoded_latest(latest_records(raw_frame(spark, rows)), schema)
        for rows in (as_records(TOPIC, records), as_records(TOPIC, records[:2]))
    )
    assert survey(full).lacking and rebuild_table(full, schema).lacks_values()
    assert not survey(whole).lacking and not rebuild_table(whole, schema).lacks_values()


@pytest.mark.parametrize("sink", ["duckdb", "delta"])
def test_a_rebuild_takes_an_unchanged_toast_value_from_the_older_record(
    log: LocalLog, spark: Any, tmp_path: Path, sink: str
) -> None:
    target = open_sink(f"{sink}://{tmp_path}/out{'.duckdb' if sink == 'duckdb' else ''}", spark)
    (result,) = ReplayEngine(spark, log, target).run(ReplayJob((TOPIC,)))
    assert result.mode == "rebuild"
    rows = {r["id"]: r for r in target.read("products").collect()}
    assert {i: (r["name"], r["description"]) for i, r in rows.items()} == {
        101: ("b", "first text"),
        102: ("x", "kept"),
        103: ("c", None),
    }
    assert all(PLACEHOLDER not in str(r.asDict()) for r in rows.values())
    target.close()
