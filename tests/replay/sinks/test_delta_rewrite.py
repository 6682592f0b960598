"""Small Delta tables take a batch as one overwrite of the MERGE's result; the rest MERGE.

That both paths give the MERGE's rows is the contract tests' job (``delta`` and ``delta-merge``
against the model); here, that the choice follows the table's newest checksum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replay.sinks import delta_rewrite, delta_sink
from replay.sinks.delta_log import newest_checksum, newest_operation
from replay.sinks.delta_rewrite import REWRITE_MAX_BYTES, rewrite_is_cheaper
from replay.sinks.delta_sink import DeltaSink
from tests.replay.sinks.batches import P0, SPEC, SinkFactory, delete, row, snapshot, upsert

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]


def _delta(make_sink: SinkFactory, kind: str) -> DeltaSink:
    sink = make_sink(kind)
    assert isinstance(sink, DeltaSink)
    return sink


def test_a_small_table_is_rewritten_and_a_large_or_row_tracked_one_merged(
    spark: Any, make_sink: SinkFactory, rows: Factory, changes: Factory
) -> None:
    """The rewrite is chosen from the newest checksum: its size against the sink's bound, and
    no change data feed (whose readers need the rows a MERGE changed, not a whole new table)."""
    sink = _delta(make_sink, "delta")
    path = sink.root / SPEC.name
    sink.replace(SPEC, rows(row(1, "a"), row(2, "b")), {P0: 1})
    sink.merge(SPEC, changes(upsert(1, "A", 2), delete(2, 3), upsert(3, "c", 4)), {P0: 5})
    assert newest_operation(path) == "WRITE" and rewrite_is_cheaper(path, REWRITE_MAX_BYTES)
    assert snapshot(sink) == [row(1, "A"), row(3, "c")]
    size = newest_checksum(path)["tableSizeBytes"]  # type: ignore[index]
    assert rewrite_is_cheaper(path, size) and not rewrite_is_cheaper(path, size - 1)
    assert not rewrite_is_cheaper(path, 0)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    assert not rewrite_is_cheaper(path, REWRITE_MAX_BYTES)
    sink.merge(SPEC, changes(upsert(4, "d", 6)), {P0: 7})
    assert newest_operation(path) == "MERGE"
    assert snapshot(sink) == [row(1, "A"), row(3, "c"), row(4, "d")]
    assert not rewrite_is_cheaper(sink.root / "missing", REWRITE_MAX_BYTES)
    merging = _delta(make_sink, "delta-merge")
    merging.replace(SPEC, rows(row(1, "a")), {P0: 1})
    merging.merge(SPEC, changes(upsert(1, "A", 2)), {P0: 3})
    assert newest_operation(merging.root / SPEC.name) == "MERGE"


def test_a_commit_between_the_read_and_the_rewrite_is_not_lost(
    spark: Any, make_sink: SinkFactory, rows: Factory, changes: Factory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The rewrite's scan of the table runs inside the overwrite's own transaction (Delta scans
    the table a write reads at that transaction's snapshot), so another writer's commit after
    the sink planned its rows is kept, not overwritten with the older version's rows."""
    sink = _delta(make_sink, "delta")
    path = sink.root / SPEC.name
    sink.replace(SPEC, rows(row(1, "a"), row(2, "b"), row(3, "c")), {P0: 1})
    planned = delta_rewrite.merged_rows

    def racing(*args: Any) -> Any:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 2")  # another writer, meanwhile
        return planned(*args)

    monkeypatch.setattr(delta_sink, "merged_rows", racing)
    entry = sink.merge(SPEC, changes(upsert(3, "C", 5)), {P0: 6})
    assert entry is not None and newest_operation(path) == "WRITE"
    assert snapshot(sink) == [row(1, "a"), row(3, "C")]
    assert sink.positions(SPEC.name) == {P0: 6}
