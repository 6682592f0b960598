"""The Sink contract, run on every backend (DuckDB and Delta): same batches, same behaviour.

Delta writes cost seconds each, so each test covers a scenario with few writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replay.sinks.ledger import PositionsRegressedError
from replay.sinks.protocol import OP_REJECTED, RejectedRecordsError, Sink
from tests.replay.sinks.batches import (
    P0,
    P1,
    SPEC,
    MergeModel,
    SinkFactory,
    delete,
    random_batches,
    row,
    snapshot,
    truncate,
    upsert,
)

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]


def test_replace_then_merges_with_ledger_history(
    sink: Sink, rows: Factory, changes: Factory
) -> None:
    assert sink.positions(SPEC.name) == {} and sink.tables() == [] and sink.history("x") == []
    entry = sink.replace(SPEC, rows(row(1, "a"), row(2, "b")), {P0: 10, P1: 4})
    assert entry is not None and (entry.table, entry.mode) == (SPEC.name, "replace")
    assert snapshot(sink) == [row(1, "a"), row(2, "b")]
    assert sink.read(SPEC.name).columns == ["id", "name", "amount"]
    assert sink.tables() == [SPEC.name]

    sink.merge(SPEC, changes(upsert(1, "A", 10), upsert(3, "c", 11)), {P0: 12})
    last = sink.merge(SPEC, changes(delete(2, 12)), {P1: 6})
    assert snapshot(sink) == [row(1, "A"), row(3, "c")]
    history = sink.history(SPEC.name)
    assert [(e.mode, e.positions) for e in history] == [
        ("replace", {P0: 10, P1: 4}),
        ("merge", {P0: 12, P1: 4}),
        ("merge", {P0: 12, P1: 6}),
    ]
    assert history[-1] == last and sink.positions(SPEC.name) == {P0: 12, P1: 6}
    versions = [e.version for e in history]
    assert versions == sorted(set(versions))
    assert all(e.committed_at_ms > 1_600_000_000_000 for e in history)
    assert snapshot(sink, history[-1].version) == snapshot(sink)


def test_merge_newer_wins_and_deletes_are_remembered(sink: Sink, changes: Factory) -> None:
    first = [upsert(1, "a", 1), upsert(2, "b", 2), upsert(3, "c", 3), delete(4, 7)]
    sink.merge(SPEC, changes(*first), {P0: 4})
    assert snapshot(sink) == [row(1, "a"), row(2, "b"), row(3, "c")]
    # 1 updated, 2 deleted, 3's change is older than its row, 4's older than its delete.
    second = [upsert(1, "a2", 5), delete(2, 6), upsert(3, "stale", 2), upsert(4, "late", 6)]
    sink.merge(SPEC, changes(*second, upsert(5, "e", 8)), {P0: 9})
    assert snapshot(sink) == [row(1, "a2"), row(3, "c"), row(5, "e")]
    # A late upsert older than 2's delete stays out; one newer than 4's delete comes in.
    sink.merge(SPEC, changes(upsert(2, "late", 4), upsert(4, "back", 20)), {P0: 12})
    assert snapshot(sink) == [row(1, "a2"), row(3, "c"), row(4, "back"), row(5, "e")]


def test_truncate_clears_table_and_tombstones(sink: Sink, changes: Factory) -> None:
    sink.merge(SPEC, changes(upsert(1, "a", 1), upsert(2, "b", 2), delete(3, 9)), {P0: 3})
    sink.merge(
        SPEC, changes(upsert(4, "d", 1, truncated=True), delete(1, 2, truncated=True)), {P0: 5}
    )
    assert snapshot(sink) == [row(4, "d")]
    # The truncate forgot key 3's delete at 9: an upsert at 5 now applies.
    sink.merge(SPEC, changes(upsert(3, "c", 5)), {P0: 6})
    assert snapshot(sink) == [row(3, "c"), row(4, "d")]
    sink.merge(SPEC, changes(truncate()), {P0: 7})
    assert snapshot(sink) == [] and sink.positions(SPEC.name) == {P0: 7}


def test_a_batch_marking_bad_records_is_refused_and_writes_nothing(
    sink: Sink, changes: Factory
) -> None:
    sink.merge(SPEC, changes(upsert(1, "a", 1), delete(3, 2)), {P0: 2})
    marked = (None, None, None, OP_REJECTED, None, False)  # what the engine adds per bad record
    batch = [upsert(1, "A", 3), upsert(2, "b", 4), delete(1, 6, truncated=True)]
    for bad in ([marked], [marked, marked]):
        with pytest.raises(RejectedRecordsError) as refused:
            sink.merge(SPEC, changes(*batch[:2], *bad), {P0: 7})
        assert (refused.value.table, refused.value.count) == (SPEC.name, len(bad))
        with pytest.raises(RejectedRecordsError):  # a truncating batch too: nothing cleared
            sink.merge(SPEC, changes(batch[2], *bad), {P0: 7})
    assert snapshot(sink) == [row(1, "a")] and sink.positions(SPEC.name) == {P0: 2}
    assert len(sink.history(SPEC.name)) == 1
    sink.merge(SPEC, changes(*batch[:2]), {P0: 7})  # the same batch without the marks
    assert snapshot(sink) == [row(1, "A"), row(2, "b")] and sink.positions(SPEC.name) == {P0: 7}


def test_retries_are_skipped_and_backward_positions_refused(
    sink: Sink, rows: Factory, changes: Factory
) -> None:
    assert sink.replace(SPEC, rows(row(1, "a")), {P0: 5, P1: 5}) is not None
    assert sink.replace(SPEC, rows(row(9, "retry")), {P0: 5, P1: 5}) is None
    batch = changes(upsert(2, "b", 6))
    assert sink.merge(SPEC, batch, {P0: 7}) is not None
    assert sink.merge(SPEC, batch, {P0: 7}) is None
    assert sink.merge(SPEC, changes(upsert(3, "stale", 4)), {P0: 6, P1: 2}) is None
    with pytest.raises(PositionsRegressedError, match=r"accounts.*db\.accounts partition 1"):
        sink.merge(SPEC, changes(upsert(3, "c", 8)), {P0: 9, P1: 4})
    assert snapshot(sink) == [row(1, "a"), row(2, "b")]
    assert [(e.mode, e.positions) for e in sink.history(SPEC.name)] == [
        ("replace", {P0: 5, P1: 5}),
        ("merge", {P0: 7, P1: 5}),
    ]


def test_equal_results_on_both_sinks(make_sink: SinkFactory, changes: Factory) -> None:
    """Every backend and every way of writing (DuckDB from Parquet and from Arrow, Delta by
    rewriting the table and by MERGE) ends each batch with the model's rows."""
    sinks = [make_sink(kind) for kind in ("duckdb", "duckdb-arrow", "delta", "delta-merge")]
    model = MergeModel()
    for i, batch in enumerate(random_batches(seed=7, count=6)):
        model.apply(batch)
        for sink in sinks:
            assert sink.merge(SPEC, changes(*batch), {P0: 10 * (i + 1)}) is not None
        assert [snapshot(sink) for sink in sinks] == [model.snapshot()] * len(sinks), i
    histories = [[(e.mode, e.positions) for e in sink.history(SPEC.name)] for sink in sinks]
    assert histories == [histories[0]] * len(sinks)
