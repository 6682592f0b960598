"""The full-rebuild fast path keeps exactly the newest image of every live key: updates,
delete + tombstone, truncate, primary-key change, keys in several partitions."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from cdc.state.changes import CapturedChange
from replay.decode import compaction, repeated_keys
from replay.decode.compaction import (
    ANYTHING,
    WINNER_BROADCAST_BYTES,
    Survey,
    arrow_bytes,
    broadcasts_winners,
    decoded_latest,
    latest_records,
    newest_offsets,
    rebuild_table,
    survey,
)
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from replay.spark import T, driver_heap_bytes
from tests.replay.decode.conftest import ACCOUNTS, Changelog, account, comparable, raw_frame

pytestmark = pytest.mark.integration


def _schema(log: Changelog) -> TopicSchema:
    newest = [r for r in log.records if r[4] is not None][-1]
    return TopicSchema.from_record(newest[4] or b"", newest[3])


def _history() -> tuple[Changelog, dict[int, dict[str, Any]]]:
    """A changelog over three partitions and the table it leaves."""
    log = Changelog(partitions=3)
    table: dict[int, dict[str, Any]] = {}

    def put(row: dict[str, Any]) -> None:
        log.upsert(table.get(row["id"]), row)
        table[row["id"]] = row

    for i in range(1, 9):
        put(account(i))
    log.truncate(list(table.values()))  # t on every partition, then d + tombstone per row
    table.clear()
    for i in range(1, 13):
        put(account(i, balance=Decimal(i)))
    for i in (2, 4):  # updates
        put(account(i, balance=Decimal(100 + i), name=f"updated-{i}"))
    log.delete(table.pop(5))  # delete + tombstone
    log.delete(table.pop(6))
    put(account(6, name="re-created"))  # a deleted key comes back
    old = table.pop(7)  # a primary-key change: delete of 7 and create of 70 in one transaction
    moved = account(70, name="was-7")
    log.commit(
        CapturedChange.between(ACCOUNTS.name, {"id": 7}, old, None),
        CapturedChange.between(ACCOUNTS.name, {"id": 70}, None, moved),
    )
    table[70] = moved
    # Key 9 also in another partition (a repartitioned topic): the newer write wins by __pos.
    log.upsert(table[9], account(9, name="newer-elsewhere"), partition=_other_partition(log, 9))
    table[9] = account(9, name="newer-elsewhere")
    # Key 10 deleted in another partition: its stale image in the first one must not survive.
    log.delete(table.pop(10), partition=_other_partition(log, 10))
    return log, table


def _other_partition(log: Changelog, key: int) -> int:
    """A partition other than the one holding ``key``'s records."""
    for _, partition, _, raw_key, _, _ in log.records:
        if raw_key is not None and json.loads(raw_key)["payload"] == {"id": key}:
            return (partition + 1) % log.partitions
    raise AssertionError(f"no record of key {key}")


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast", "shuffled-hash"])
def test_rebuild_keeps_exactly_the_newest_image_per_key(spark: Any, broadcast: bool) -> None:
    """Both joins of the winners' values: broadcast, and shuffled hash for more keys than the
    driver can broadcast (a 10 M-key rebuild ran out of driver memory)."""
    log, table = _history()
    latest = latest_records(raw_frame(spark, log.records), broadcast=broadcast).persist()
    join = "BroadcastHashJoin" if broadcast else "ShuffledHashJoin"
    assert join in _plan(latest), _plan(latest)
    decoded = decoded_latest(latest, _schema(log)).persist()
    found = survey(decoded)
    assert found._replace(live=None) == Survey(candidates=True, rejected=False, lacking=False)
    rebuild = rebuild_table(decoded, _schema(log))
    rows = rebuild.rows().collect()
    assert sorted((comparable(r) for r in rows), key=lambda r: r["id"]) == [
        comparable(table[k]) for k in sorted(table)
    ]
    assert all(r["__unavailable"] == [] for r in rows)
    assert found.live is not None and found.live >= len(rows)  # stale copies in other partitions
    assert rebuild.truncates.count() == 3  # the truncate reached every partition
    assert rebuild.bad.count() == 0
    decoded.unpersist()
    latest.unpersist()


@pytest.mark.parametrize("at_most", [100, 0], ids=["broadcast", "shuffled-hash"])
def test_keys_in_several_partitions_keep_their_newest_change(
    spark: Any, at_most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys 9 and 10 survive compaction in two partitions each: the newest change of each wins,
    picked by a broadcast of those keys, or by a shuffled hash join when there are more of them
    than ``REPEATED_KEYS_BROADCAST``."""
    monkeypatch.setattr(repeated_keys, "REPEATED_KEYS_BROADCAST", at_most)
    log, table = _history()
    latest = latest_records(raw_frame(spark, log.records)).persist()
    decoded = decoded_latest(latest, _schema(log)).persist()
    rebuild = rebuild_table(decoded, _schema(log))
    rows = rebuild.rows()
    assert "LeftAnti" in _plan(rows)
    assert ("ShuffledHashJoin" in _plan(rows)) == (at_most == 0)
    assert sorted((comparable(r) for r in rows.collect()), key=lambda r: r["id"]) == [
        comparable(table[k]) for k in sorted(table)
    ]
    decoded.unpersist()
    latest.unpersist()


def test_the_survey_counts_repeated_keys_and_rows_pick_only_then(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the table's schema the survey counts the changes and their distinct primary keys in
    its own query: keys 9 and 10 of the history are in two partitions each, so ``rows()`` picks
    the newest change per key; where each key is in one partition it takes the changes as
    they are and runs no ``newest_per_key`` job."""
    log, table = _history()
    schema = _schema(log)
    decoded = decoded_latest(latest_records(raw_frame(spark, log.records)), schema).persist()
    found = survey(decoded, schema)
    assert found.repeated and found._replace(live_bytes=None, keys=None) == survey(
        decoded
    )._replace(live_bytes=None)
    assert found.keys is not None and found.keys >= len(table)
    rows = rebuild_table(decoded, schema, found).rows()
    assert "LeftAnti" in _plan(rows)
    assert sorted((comparable(r) for r in rows.collect()), key=lambda r: r["id"]) == [
        comparable(table[k]) for k in sorted(table)
    ]
    decoded.unpersist()

    single = Changelog(partitions=2)
    kept = {i: account(i) for i in range(1, 7)}
    for row in kept.values():
        single.upsert(None, row)
    single.delete(kept.pop(3))
    records = [*single.records, ("proc.accounts", 0, 99, b'{"id":2}', b"not json", 0)]
    decoded = decoded_latest(latest_records(raw_frame(spark, records)), schema).persist()
    found = survey(decoded, schema)
    assert not found.repeated and found.rejected  # a bad record's key is not a change's
    assert found.keys == 6  # the deleted key 3 too
    monkeypatch.setattr(compaction, "newest_per_key", _no_pick_needed)
    rebuilt = rebuild_table(decoded, schema, found)
    newest = {r["id"]: r["__op"] for r in rebuilt.newest().collect()}
    assert newest == {**dict.fromkeys(kept, "u"), 3: "d"}
    rows = rebuilt.rows()
    assert sorted((comparable(r) for r in rows.collect()), key=lambda r: r["id"]) == [
        comparable(kept[k]) for k in sorted(kept)
    ]
    decoded.unpersist()


def _no_pick_needed(*_: Any) -> Any:
    raise AssertionError("newest_per_key ran though the survey found no repeated key")


def test_rebuild_without_truncate_and_with_bad_records(spark: Any) -> None:
    log = Changelog()
    log.upsert(None, account(1))
    log.upsert(None, account(2))
    records = [*log.records, ("proc.accounts", 0, 2, b'{"id":3}', b"not json", 0)]
    records.append(("proc.accounts", 0, 3, None, b'{"also": "not an event"}', 0))
    latest = latest_records(raw_frame(spark, records))
    rebuild = rebuild_table(decoded_latest(latest, _schema(log), decode_python), _schema(log))
    assert sorted(r["id"] for r in rebuild.rows().collect()) == [1, 2]
    assert rebuild.truncates.count() == 0  # (decoded on the Python path)
    bad = {r.offset: r.reason for r in rebuild.bad.collect()}
    assert sorted(bad) == [2, 3]
    assert "not JSON" in bad[2] and "offset 2" in bad[2]


def test_rebuild_without_truncate_candidates_leaves_out_the_truncate_jobs(spark: Any) -> None:
    log = Changelog(partitions=2)
    table = {i: account(i) for i in range(1, 7)}
    for row in table.values():
        log.upsert(None, row)
    log.upsert(table[2], account(2, name="updated"))
    table[2] = account(2, name="updated")
    log.delete(table.pop(3))
    records = [*log.records, ("proc.accounts", 0, 99, b'{"id":9}', b"not json", 0)]
    latest = latest_records(raw_frame(spark, records)).persist()
    decoded = decoded_latest(latest, _schema(log)).persist()
    found = survey(decoded)
    assert found == Survey(candidates=False, rejected=True, lacking=False, live=len(table))
    full, lean = (rebuild_table(decoded, _schema(log), f) for f in (ANYTHING, found))
    assert "InMemoryTableScan" in _plan(lean.rows()) and "InMemoryTableScan" in _plan(lean.bad)
    assert "LeftAnti" not in _plan(lean.rows())  # no key in two partitions: no pick
    assert sorted((comparable(r) for r in lean.rows().collect()), key=lambda r: r["id"]) == [
        comparable(table[k]) for k in sorted(table)
    ]
    assert sorted(lean.rows().collect()) == sorted(full.rows().collect())
    assert [r.offset for r in lean.bad.collect()] == [r.offset for r in full.bad.collect()] == [99]
    assert lean.truncates.count() == 0
    clean = decoded_latest(latest.where("offset != 99"), _schema(log)).persist()
    found = survey(clean)
    assert found == Survey(candidates=False, rejected=False, lacking=False, live=len(table))
    nothing_bad = rebuild_table(clean, _schema(log), found).bad
    assert "LocalTableScan <empty>" in _plan(nothing_bad), _plan(nothing_bad)
    clean.unpersist()
    decoded.unpersist()
    latest.unpersist()


def test_a_bad_record_a_truncate_clears_is_not_reported(spark: Any) -> None:
    """Records at or before their partition's last truncate are neither rows nor bad records,
    though the rebuild decodes them with the rest in one pass."""
    log = Changelog()
    log.upsert(None, account(1))
    log.append(0, b'{"id":3}', b"not json")
    log.truncate([account(1)])
    log.upsert(None, account(2))
    schema = _schema(log)
    after = log.append(0, b'{"id":4}', b"not json")
    decoded = decoded_latest(latest_records(raw_frame(spark, log.records)), schema).persist()
    found = survey(decoded)
    assert found == Survey(candidates=True, rejected=True, lacking=False, live=1)
    rebuild = rebuild_table(decoded, schema, found)
    assert [r["id"] for r in rebuild.rows().collect()] == [2]
    assert rebuild.truncates.count() == 1
    assert [r.offset for r in rebuild.bad.collect()] == [after]
    decoded.unpersist()


def test_winners_are_broadcast_up_to_the_driver_heaps_share(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = raw_frame(spark, _history()[0].records)
    newest = newest_offsets(records).persist()
    winners = newest.count()
    assert broadcasts_winners(spark, newest)
    assert winners * WINNER_BROADCAST_BYTES < driver_heap_bytes(spark) < 64 * 2**30
    # a heap share that holds only one winner: shuffled hash instead
    monkeypatch.setattr(compaction, "WINNER_BROADCAST_BYTES", driver_heap_bytes(spark))
    assert not broadcasts_winners(spark, newest)
    newest.unpersist()


def _plan(frame: Any) -> str:
    """The physical plan of ``frame``: shows whether it reads a persisted frame."""
    return str(frame._jdf.queryExecution().executedPlan().toString())


def test_arrow_bytes_sum_flat_columns_and_give_up_on_nested_ones(spark: Any) -> None:
    """A string's bytes and offset, a long's 8, a decimal's 16, an int's 4; a nested column has
    no estimate."""
    schema = T.StructType([
        T.StructField("s", T.StringType()), T.StructField("n", T.LongType()),
        T.StructField("d", T.DecimalType(10, 2)), T.StructField("i", T.IntegerType()),
        T.StructField("a", T.ArrayType(T.LongType())),
    ])  # fmt: skip
    frame = spark.createDataFrame([("héllo", 1, None, 2, [1]), (None, 3, None, None, None)], schema)
    size = arrow_bytes(frame.schema, ["s", "n", "d", "i"])
    assert size is not None
    assert [r[0] for r in frame.select(size).collect()] == [6 + 4 + 8 + 16 + 4, 4 + 8 + 16 + 4]
    assert arrow_bytes(frame.schema, ["s", "a"]) is None
