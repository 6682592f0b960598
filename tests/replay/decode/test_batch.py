"""Incremental batches: the newest change per key, truncates marked, unavailable (unchanged
TOAST) columns filled from the batch or flagged, never written as the placeholder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replay.decode.batch import batch_changes, marked_batch, truncates_decoded
from replay.decode.changes import decode_native
from replay.decode.schema import TopicSchema
from replay.decode.truncates import TRUNCATE_KEYS
from replay.sinks.protocol import OP, OP_REJECTED, POS, TRUNCATED
from tests.replay.decode.conftest import (
    PLACEHOLDER,
    Changelog,
    account,
    as_records,
    pg_update,
    raw_frame,
)

pytestmark = pytest.mark.integration


def test_newest_change_per_key_and_truncate(spark: Any) -> None:
    log = Changelog(partitions=2)
    log.upsert(None, account(1))
    log.upsert(None, account(2))
    log.truncate([account(1), account(2)])
    log.upsert(None, account(3))
    log.upsert(account(3), account(3, name="three"))
    log.upsert(None, account(4))
    log.delete(account(4))
    newest = [r for r in log.records if r[4] is not None][-1]
    schema = TopicSchema.from_record(newest[4] or b"", newest[3])
    batch = batch_changes(raw_frame(spark, log.records), schema)
    rows = {r["id"]: r for r in batch.sink_changes(schema).collect()}
    # Keys 1 and 2: only the deletes written after the truncate; None: the t row.
    assert {k: r[OP] for k, r in rows.items()} == {1: "d", 2: "d", 3: "u", 4: "d", None: "t"}
    assert rows[3]["name"] == "three"
    assert all(r[TRUNCATED] for r in rows.values())
    assert list(batch.sink_changes(schema).columns)[-3:] == [OP, POS, TRUNCATED]

    quiet = batch_changes(raw_frame(spark, log.records[-4:]), schema).changes.collect()
    assert {(r["id"], r[OP], r[TRUNCATED]) for r in quiet} == {(3, "u", False), (4, "d", False)}


def test_a_batch_decoded_once_gives_the_truncates_and_changes_of_decoding_it_twice(
    spark: Any,
) -> None:
    log = Changelog(partitions=2)
    for i in range(1, 5):
        log.upsert(None, account(i))
    log.truncate([account(i) for i in range(1, 5)])
    log.upsert(None, account(5))
    log.upsert(account(5), account(5, name="five"))
    newest = [r for r in log.records if r[4] is not None][-1]
    schema = TopicSchema.from_record(newest[4] or b"", newest[3])
    records = raw_frame(spark, log.records)
    decoded = decode_native(records, schema)
    decoded.all.persist()
    try:
        truncates = truncates_decoded(decoded)
        once = batch_changes(records, schema, truncates=truncates, decoded=decoded)
        rows = sorted(once.sink_changes(schema).collect(), key=repr)
    finally:
        decoded.all.unpersist()
    written = {(r[1], r[2]) for r in log.records if r[3] in (None, *TRUNCATE_KEYS) and r[4]}
    assert written and {(t.tp.partition, t.offset) for t in truncates} == written
    twice = batch_changes(records, schema).sink_changes(schema).collect()
    assert rows == sorted(twice, key=repr)
    assert {r["id"]: r[OP] for r in rows}[5] == "u"


def test_unavailable_columns_are_filled_from_the_batch_or_flagged(spark: Any) -> None:
    values = [
        pg_update(100, 101, "first text", "a"),
        pg_update(200, 101, PLACEHOLDER, "b"),  # TOAST unchanged: keep "first text"
        pg_update(300, 102, PLACEHOLDER, "c"),  # nothing older in the batch: flagged
    ]
    keys = [json.dumps({"id": i}).encode() for i in (101, 101, 102)]
    frame = raw_frame(spark, as_records("pg.products", list(zip(keys, values, strict=True))))
    schema = TopicSchema.from_record(values[-1], keys[-1])
    rows = {r["id"]: r for r in batch_changes(frame, schema).changes.collect()}
    assert (rows[101]["name"], rows[101]["description"]) == ("b", "first text")
    assert rows[101]["__unavailable"] == []
    assert (rows[102]["description"], rows[102]["__unavailable"]) == (None, ["description"])
    assert all(PLACEHOLDER not in str(r.asDict()) for r in rows.values())


def _with_bad_records(log: Changelog) -> list[Any]:
    """``log``'s records plus, in each partition, a record that is not JSON and a change event
    whose column does not decode, keyed like the partition's last good record."""
    records = list(log.records)
    for partition in range(log.partitions):
        keyed = [r for r in records if r[3] not in (None, *TRUNCATE_KEYS) and r[4]]
        topic, _, _, key, value, _ = [r for r in keyed if r[1] == partition][-1]
        broken = json.loads(value or b"")
        (broken["payload"]["after"] or broken["payload"]["before"])["id"] = "not a number"
        next_offset = 1 + max(r[2] for r in records if r[1] == partition)
        records.append((topic, partition, next_offset, key, b"{not json", next_offset))
        records.append((topic, partition, next_offset + 1, key, json.dumps(broken).encode(), 0))
    return records


@pytest.mark.parametrize("truncated", [False, True])
def test_a_marked_batch_in_one_pass_equals_the_changes_and_their_marks(
    spark: Any, truncated: bool
) -> None:
    log = Changelog(partitions=2)
    for i in range(1, 7):
        log.upsert(None, account(i))
    if truncated:
        log.truncate([account(i) for i in range(1, 7)])
    log.upsert(account(5), account(5, name="five"))
    log.upsert(None, account(8))
    log.delete(account(8))
    records = _with_bad_records(log)
    newest = [r for r in log.records if r[4] is not None][-1]
    schema = TopicSchema.from_record(newest[4] or b"", newest[3])
    decoded = decode_native(raw_frame(spark, records), schema)
    truncates = truncates_decoded(decoded)
    assert bool(truncates) == truncated
    one_pass = marked_batch(decoded, schema, truncates)
    two = batch_changes(raw_frame(spark, records), schema, truncates=truncates, decoded=decoded)
    union = two.marked_changes(schema)
    assert one_pass.columns == union.columns
    rows = one_pass.collect()
    assert sorted(map(repr, rows)) == sorted(map(repr, union.collect()))
    assert sum(r[OP] == OP_REJECTED for r in rows) == 4  # each bad record marked once
    assert {r["id"] for r in rows if r[OP] == "u"} == ({5} if truncated else {1, 2, 3, 4, 5, 6})


def test_a_marked_batch_fills_unavailable_columns_as_the_changes_do(spark: Any) -> None:
    values = [
        pg_update(100, 101, "first text", "a"),
        pg_update(200, 101, PLACEHOLDER, "b"),
        pg_update(300, 102, PLACEHOLDER, "c"),
        b"[1, 2",
    ]
    keys = [json.dumps({"id": i}).encode() for i in (101, 101, 102, 102)]
    frame = raw_frame(spark, as_records("pg.products", list(zip(keys, values, strict=True))))
    schema = TopicSchema.from_record(values[0], keys[0])
    decoded = decode_native(frame, schema)
    one_pass = {r["id"]: r for r in marked_batch(decoded, schema, []).collect()}
    union = batch_changes(frame, schema, truncates=[], decoded=decoded).marked_changes(schema)
    assert sorted(map(repr, one_pass.values())) == sorted(map(repr, union.collect()))
    assert (one_pass[101]["name"], one_pass[101]["description"]) == ("b", "first text")
    assert one_pass[None][OP] == OP_REJECTED
