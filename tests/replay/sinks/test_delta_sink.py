"""Delta-specific guarantees: crash between the two tables, Delta-level txn dedup, time travel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replay.sinks import delta_tombstones
from replay.sinks.delta_log import commit_versions, data_file_count, latest_version
from replay.sinks.delta_sink import TXN_APP_ID, TXN_VERSION, USER_METADATA, DeltaSink
from replay.sinks.delta_tombstones import DeltaTombstones
from replay.sinks.ledger import VersionUnavailableError, encode_metadata
from replay.sinks.merge_rules import tombstones_table
from replay.sinks.protocol import TableSpec
from tests.replay.sinks.batches import P0, SPEC, SinkFactory, delete, row, snapshot, upsert

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]


def _delta(make_sink: SinkFactory, kind: str = "delta") -> DeltaSink:
    sink = make_sink(kind)
    assert isinstance(sink, DeltaSink)
    return sink


def _tombstones(spark: Any, sink: DeltaSink) -> list[tuple[Any, ...]]:
    """The newest delete position per key, as the table's MERGE reads them."""
    newest = DeltaTombstones(spark, sink.root, SPEC).newest()
    assert newest is not None
    return sorted(tuple(r) for r in newest.collect())


def _stored_tombstones(spark: Any, sink: DeltaSink) -> list[tuple[Any, ...]]:
    path = str(sink.root / tombstones_table(SPEC.name))
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


@pytest.mark.parametrize("kind", ["delta", "delta-merge"])
def test_crash_between_tombstones_and_table_then_retry(
    spark: Any, make_sink: SinkFactory, changes: Factory, monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:  # fmt: skip
    sink = _delta(make_sink, kind)
    sink.merge(SPEC, changes(upsert(1, "a", 1), upsert(2, "b", 2)), {P0: 2})
    batch = changes(delete(1, 5), upsert(2, "b2", 6), upsert(3, "c", 4))
    spark.conf.set(USER_METADATA, "the caller's own")

    def crash(*_: Any, **__: Any) -> None:
        raise RuntimeError("injected crash between the tombstones and the table")

    with monkeypatch.context() as patched:
        patched.setattr(DeltaSink, "_apply", crash)
        with pytest.raises(RuntimeError, match="injected crash"):
            sink.merge(SPEC, batch, {P0: 7})
    assert _tombstones(spark, sink) == [(1, "00000005")]
    assert sink.positions(SPEC.name) == {P0: 2}
    assert snapshot(sink) == [row(1, "a"), row(2, "b")]

    entry = sink.merge(SPEC, batch, {P0: 7})
    assert entry is not None and entry.positions == {P0: 7}
    assert snapshot(sink) == [row(2, "b2"), row(3, "c")]
    assert _tombstones(spark, sink) == [(1, "00000005")]
    # The retry appended the same fact again: harmless, the MERGE reads the newest per key.
    assert _stored_tombstones(spark, sink) == [(1, "00000005"), (1, "00000005")]
    assert sink.merge(SPEC, batch, {P0: 7}) is None
    assert [e.positions for e in sink.history(SPEC.name)] == [{P0: 2}, {P0: 7}]
    # The shared session's confs are back as they were, after the failure and the success.
    assert spark.conf.get(USER_METADATA) == "the caller's own"
    assert spark.conf.get(TXN_APP_ID, None) is None and spark.conf.get(TXN_VERSION, None) is None
    spark.conf.unset(USER_METADATA)


@pytest.mark.parametrize("kind", ["delta", "delta-merge"])
def test_delta_drops_a_twin_write_with_the_same_txn_version(
    make_sink: SinkFactory, rows: Factory, changes: Factory, monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:  # fmt: skip
    """A racing twin that read the ledger before our commit reuses its seq: Delta skips it.

    This is what proves that Delta 4.4 honours the txnAppId/txnVersion session confs for MERGE
    and the writer options for an overwrite (the bulk replace, a small table's rewrite): the
    sink's own ledger check is bypassed.
    """
    sink = _delta(make_sink, kind)
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    assert sink.merge(SPEC, changes(upsert(2, "b", 2)), {P0: 2}) is not None
    table_dir = sink.root / SPEC.name
    versions = commit_versions(table_dir)

    def planned_before(version: int) -> Callable[[str, str, Any], tuple[int, str, int]]:
        """The plan of a twin that read the ledger when the table was at ``version``."""
        return lambda table, mode, positions: (
            version + 1,
            encode_metadata(version + 1, mode, dict(positions)),
            version,
        )

    monkeypatch.setattr(sink, "_plan", planned_before(versions[-1] - 1))
    assert sink.merge(SPEC, changes(upsert(3, "twin", 3)), {P0: 3}) is None
    assert commit_versions(table_dir) == versions
    monkeypatch.setattr(sink, "_plan", planned_before(-1))
    assert sink.replace(SPEC, rows(row(9, "twin")), {P0: 9}) is None
    assert commit_versions(table_dir) == versions
    assert snapshot(sink) == [row(1, "a"), row(2, "b")]


def test_time_travel_to_every_ledger_entry(
    make_sink: SinkFactory, rows: Factory, changes: Factory
) -> None:
    sink = _delta(make_sink)
    sink.replace(SPEC, rows(row(1, "a"), row(2, "b")), {P0: 3})
    sink.merge(SPEC, changes(upsert(1, "A", 4)), {P0: 5})
    first, second = sink.history(SPEC.name)
    assert snapshot(sink, first.version) == [row(1, "a"), row(2, "b")]
    assert snapshot(sink, second.version) == [row(1, "A"), row(2, "b")]
    with pytest.raises(VersionUnavailableError, match="no version 99"):
        sink.read(SPEC.name, 99)
    with pytest.raises(VersionUnavailableError, match="no table missing"):
        sink.read("missing")
    assert sink.tables() == [SPEC.name]


def test_a_merge_into_a_table_without_ledger_is_refused(
    spark: Any, make_sink: SinkFactory, changes: Factory
) -> None:
    sink = _delta(make_sink)
    foreign = spark.createDataFrame([(1, "a")], "id BIGINT, name STRING")
    foreign.write.format("delta").save(str(sink.root / SPEC.name))
    with pytest.raises(VersionUnavailableError, match="no replicator ledger entry"):
        sink.merge(SPEC, changes(upsert(2, "b", 1)), {P0: 1})
    assert sink.positions(SPEC.name) == {} and sink.history(SPEC.name) == []


def test_the_ledger_is_read_from_the_checkpoint_forward_on_a_real_log(
    spark: Any, make_sink: SinkFactory, rows: Factory, changes: Factory
) -> None:
    """With checkpoints (every 2 commits here, 10 by default) the sink finds the newest
    version and ledger entry without listing the log; they are the listing's."""
    sink = _delta(make_sink)
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    path = sink.root / SPEC.name
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    for offset in range(2, 6):
        assert sink.merge(SPEC, changes(upsert(offset, f"v{offset}", offset)), {P0: offset + 1})
    assert (path / "_delta_log" / "_last_checkpoint").is_file()
    assert latest_version(path) == max(commit_versions(path))
    assert sink.positions(SPEC.name) == {P0: 6}
    assert sink.merge(SPEC, changes(upsert(5, "v5", 5)), {P0: 6}) is None  # covered
    assert [e.positions for e in sink.history(SPEC.name)][-1] == {P0: 6}


def _checkpoint_interval(spark: Any, path: Any) -> str | None:
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    value = detail["properties"].get("delta.checkpointInterval")
    return None if value is None else str(value)


def test_tables_are_created_with_a_checkpoint_every_100_commits_and_keep_a_users_setting(
    spark: Any, make_sink: SinkFactory, rows: Factory, changes: Factory
) -> None:
    """A ``--follow`` commits every round: Delta's default checkpoint (every 10 commits, written
    inside the commit) was a slow round in ten. A user's own setting survives the sink's writes."""
    sink = _delta(make_sink)
    sink.merge(SPEC, changes(upsert(1, "a", 1), delete(2, 2)), {P0: 3})
    for table in (SPEC.name, tombstones_table(SPEC.name)):
        assert _checkpoint_interval(spark, sink.root / table) == "100"
    path = sink.root / SPEC.name
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '7')")
    sink.replace(SPEC, rows(row(1, "b")), {P0: 4})
    sink.merge(SPEC, changes(upsert(3, "c", 4)), {P0: 5})
    assert _checkpoint_interval(spark, path) == "7"
    assert snapshot(sink) == [row(1, "b"), row(3, "c")]


def test_the_merge_joins_tombstones_only_once_a_delete_is_remembered(
    spark: Any, make_sink: SinkFactory, changes: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = _delta(make_sink)
    joins: list[str] = []
    applicable = DeltaSink._applicable

    def counted(self: DeltaSink, spec: Any, frame: Any) -> Any:
        joins.append(spec.name)
        return applicable(self, spec, frame)

    monkeypatch.setattr(DeltaSink, "_applicable", counted)
    tombstones = sink.root / tombstones_table(SPEC.name)
    sink.merge(SPEC, changes(upsert(1, "a", 1), upsert(2, "b", 2)), {P0: 2})
    assert data_file_count(tombstones) == 0  # the real checksum of an empty table
    sink.merge(SPEC, changes(upsert(1, "a2", 3), delete(2, 4)), {P0: 4})
    assert joins == [] and data_file_count(tombstones) == 1
    # Key 2's delete is remembered: a late older upsert of it stays out.
    sink.merge(SPEC, changes(upsert(2, "late", 3), upsert(3, "c", 5)), {P0: 6})
    assert joins == [SPEC.name]
    assert snapshot(sink) == [row(1, "a2"), row(3, "c")]


def test_tombstones_are_appended_and_folded_to_one_row_per_key_once_grown(
    spark: Any, make_sink: SinkFactory, changes: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delta_tombstones, "FOLD_AFTER_FILES", 2)
    sink = _delta(make_sink)
    tombstones = sink.root / tombstones_table(SPEC.name)
    sink.merge(SPEC, changes(upsert(1, "a", 1), upsert(2, "b", 2)), {P0: 2})
    sink.merge(SPEC, changes(delete(1, 3)), {P0: 3})
    sink.merge(SPEC, changes(delete(1, 5), delete(2, 4)), {P0: 5})
    assert data_file_count(tombstones) == 2  # one blind append per batch with deletes
    assert _stored_tombstones(spark, sink) == [(1, "00000003"), (1, "00000005"), (2, "00000004")]
    assert _tombstones(spark, sink) == [(1, "00000005"), (2, "00000004")]
    sink.merge(SPEC, changes(delete(2, 6), upsert(3, "c", 6)), {P0: 6})  # a third file: folded
    assert data_file_count(tombstones) == 1
    assert _stored_tombstones(spark, sink) == [(1, "00000005"), (2, "00000006")]
    # Late older upserts of both keys stay out; a newer one of key 1 comes back.
    sink.merge(SPEC, changes(upsert(1, "new", 7), upsert(2, "late", 5)), {P0: 7})
    assert snapshot(sink) == [row(1, "new"), row(3, "c")]


ITEM_META = "__op STRING, __pos STRING, __truncated BOOLEAN"


def _items(spark: Any, rows: list[tuple[Any, ...]], key_type: str) -> Any:
    return spark.createDataFrame(rows, f"id {key_type}, note STRING, {ITEM_META}")


def test_a_retyped_key_keeps_the_stored_tombstones_that_the_new_type_holds(
    spark: Any, make_sink: SinkFactory
) -> None:
    sink, spec = _delta(make_sink), TableSpec("items", ("id",))
    big = 5_000_000_000
    sink.merge(spec, _items(spark, [(1, "a", "u", "01", False), (big, "b", "u", "02", False)],
                            "BIGINT"), {P0: 2})  # fmt: skip
    sink.merge(spec, _items(spark, [(1, None, "d", "03", False), (big, None, "d", "04", False)],
                            "BIGINT"), {P0: 4})  # fmt: skip
    # Narrowed to INT: key 1's tombstone is kept (converted), the big key's can never match again.
    sink.merge(spec, _items(spark, [(2, "c", "u", "05", False), (3, None, "d", "06", False)],
                            "INT"), {P0: 6})  # fmt: skip
    stored = DeltaTombstones(spark, sink.root, spec).newest()
    assert stored is not None and stored.schema["id"].dataType.simpleString() == "int"
    assert sorted(tuple(r) for r in stored.collect()) == [(1, "03"), (3, "06")]
    # Widened again: the stored facts still apply, a late older upsert of key 1 stays out.
    sink.merge(spec, _items(spark, [(1, "late", "u", "02", False), (4, None, "d", "07", False)],
                            "BIGINT"), {P0: 8})  # fmt: skip
    assert sorted(tuple(r) for r in sink.read("items").collect()) == [(2, "c")]


def test_a_changed_primary_key_leaves_the_old_tombstones_out(
    spark: Any, make_sink: SinkFactory, changes: Factory
) -> None:
    sink = _delta(make_sink)
    sink.merge(SPEC, changes(upsert(1, "a", 1), upsert(2, "b", 2)), {P0: 2})
    sink.merge(SPEC, changes(delete(1, 3)), {P0: 3})
    rekeyed = TableSpec(SPEC.name, ("id", "name"))
    sink.merge(rekeyed, changes(upsert(3, "c", 4)), {P0: 4})  # no delete: nothing to join
    assert snapshot(sink) == [row(2, "b"), row(3, "c")]
    gone = (2, "b", None, "d", "00000005", False)
    sink.merge(rekeyed, changes(gone, upsert(1, "a", 2)), {P0: 5})  # old facts replaced
    assert _stored_tombstones(spark, sink) == [(2, "b", "00000005")]
    assert snapshot(sink) == [row(1, "a"), row(3, "c")]


def test_a_replace_clears_tombstones_and_makes_none_where_there_are_none(
    spark: Any, make_sink: SinkFactory, changes: Factory, rows: Factory
) -> None:
    """A first replace writes no tombstone table (nothing to clear: one Delta commit less in a
    rebuild); the first merge with a delete makes it and keeps a late older upsert out; a replace
    over remembered deletes clears them."""
    sink = _delta(make_sink)
    tombstones = sink.root / tombstones_table(SPEC.name)
    sink.replace(SPEC, rows(row(1, "a"), row(2, "b")), {P0: 2})
    assert not (tombstones / "_delta_log").exists()
    sink.merge(SPEC, changes(delete(2, 3)), {P0: 3})
    sink.merge(SPEC, changes(upsert(2, "late", 2), upsert(3, "c", 4)), {P0: 4})
    assert snapshot(sink) == [row(1, "a"), row(3, "c")]
    assert _tombstones(spark, sink) == [(2, "00000003")]
    sink.replace(SPEC, rows(row(2, "b")), {P0: 5})
    assert _stored_tombstones(spark, sink) == []
    sink.merge(SPEC, changes(upsert(2, "b2", 1)), {P0: 6})  # no delete of key 2 remembered
    assert snapshot(sink) == [row(2, "b2")]
