"""A Delta projection's mirror and master written side by side: a failure of either write leaves
tables the next batch brings back to the last committed one, and the projection ends equal to
a plain-Python reference of the source."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from projections import SqlProjection
from replay.projection.engine import ProjectionEngine, ProjectionJob
from replay.projection.versions import ProjectionVersions
from replay.sinks import delta_pair
from replay.sinks.delta_log import read_ledger
from replay.sinks.delta_projection import DeltaProjectionStore
from replay.sinks.delta_recovery import staged
from replay.sinks.registry import open_sink
from replay.sinks.sql_projection import MIRROR_SUFFIX
from tests.projections.sql.workload import PROJECTIONS, SourceMirror, normalized
from tests.replay.projection.workload import TOPIC, SalesTopic

pytestmark = pytest.mark.integration

ROW = {"region": "eu", "seats": 2, "refunded": False}


class _Crash(Exception):
    """The failure injected into one of the two writes."""


class _Projection:
    """The seed's projection (COUNT per title) kept by a projection engine into a Delta sink."""

    def __init__(self, spark: Any, root: Path) -> None:
        self.log = LocalLog.from_url(f"local://{root}/log")
        self.sink = open_sink(f"delta://{root}/out", spark)
        self.topic = SalesTopic(self.log)
        self.source = SourceMirror({})
        self.engine = ProjectionEngine(spark, self.log, self.sink)
        self.job = ProjectionJob(SqlProjection.parse(PROJECTIONS["seed"]), TOPIC)
        self.versions = ProjectionVersions(self.engine, self.job.name)

    @property
    def store(self) -> DeltaProjectionStore:
        store = self.engine.store
        assert isinstance(store, DeltaProjectionStore)
        return store

    def write(self, *ops: tuple[Any, ...]) -> None:
        self.topic.write(self.source.changes(list(ops)))

    def serve(self) -> None:
        self.versions.serve(self.job)

    def tables(self) -> tuple[str, str]:
        """The master and the mirror of the served version."""
        master = next(p.name for p in self.store.root.iterdir() if p.name.endswith("__v1"))
        return master, master + MIRROR_SUFFIX

    def seqs(self) -> tuple[int, int]:
        """The seq of the newest ledger commit of the master and of the mirror."""
        return tuple(  # type: ignore[return-value]
            read_ledger(t, self.store.root / t, latest_only=True)[0].seq for t in self.tables()
        )

    def expected(self) -> list[tuple[Any, ...]]:
        counts: dict[Any, int] = {}
        for row in self.source.rows.values():
            counts[row["title"]] = counts.get(row["title"], 0) + (
                row["total_ticket_value"] is not None
            )
        return normalized(list(counts.items()))

    def rows(self) -> list[tuple[Any, ...]]:
        return normalized(self.versions.rows())

    def close(self) -> None:
        self.topic.close()
        self.sink.close()
        self.log.close()


@pytest.fixture
def projection(spark: Any, tmp_path: Path) -> Iterator[_Projection]:
    kept = _Projection(spark, tmp_path)
    yield kept
    kept.close()


def _failing(monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    """Make the side-by-side write into ``table`` fail once its sibling's is under way."""
    save = delta_pair.Overwrite.save

    def failing(self: delta_pair.Overwrite) -> None:
        if Path(self.path).name == table:
            raise _Crash(table)
        save(self)

    monkeypatch.setattr(delta_pair.Overwrite, "save", failing)


def _insert(title: str, value: str | None) -> tuple[Any, ...]:
    return ("insert", {**ROW, "title": title, "total_ticket_value": value and Decimal(value)})


def test_a_master_committed_before_its_mirror_is_followed_by_the_mirror(
    projection: _Projection, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection.write(_insert("Dune", "9.50"), _insert("Heat", None))
    projection.serve()
    _, mirror = projection.tables()
    with monkeypatch.context() as patched:
        _failing(patched, mirror)
        projection.write(("update", 0, {**ROW, "title": "Heat", "total_ticket_value": None}))
        with pytest.raises(_Crash):
            projection.serve()
    master_seq, mirror_seq = projection.seqs()
    assert mirror_seq < master_seq  # the master's batch is committed, the mirror's is not
    assert staged(projection.store.registry, mirror) == (
        master_seq, projection.store.registry / "staged" / mirror / str(master_seq)
    )  # fmt: skip
    assert projection.rows() == projection.expected()  # readers see the batch already
    # The next batch brings the mirror forward first: were it left behind, the update of Heat's
    # row below would retract the row as it was before the failed batch (Dune's), not as it is.
    projection.write(("update", 0, {**ROW, "title": "Zodiac", "total_ticket_value": None}))
    projection.serve()
    assert projection.rows() == projection.expected()
    assert staged(projection.store.registry, mirror) is None
    master_seq, mirror_seq = projection.seqs()
    assert mirror_seq == master_seq


def test_a_mirror_committed_without_its_master_is_rewound(
    projection: _Projection, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection.write(_insert("Dune", "9.50"), _insert("Heat", "12.00"))
    projection.serve()
    master, mirror = projection.tables()
    before = projection.seqs()
    with monkeypatch.context() as patched:
        _failing(patched, master)
        projection.write(("delete", 0), _insert("Heat", "45.25"))
        with pytest.raises(_Crash):
            projection.serve()
    master_seq, mirror_seq = projection.seqs()
    assert master_seq == before[0] and mirror_seq > master_seq  # the mirror went ahead alone
    assert staged(projection.store.registry, mirror) is not None
    projection.write(_insert("Dune", None))
    projection.serve()  # the mirror is rewound, the staged batch dropped, the batch redone
    assert projection.rows() == projection.expected()
    assert staged(projection.store.registry, mirror) is None
