"""Fixtures of the sink tests: sinks by kind, and DataFrames of change batches and rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.sinks.delta_sink import DeltaSink
from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink, sink_url
from tests.replay.sinks.batches import CHANGE_SCHEMA, ROW_SCHEMA, Change, SinkFactory

BACKENDS = ("duckdb", "delta")
SINK_KINDS = ("duckdb", "duckdb-arrow", "delta")
"""``duckdb-arrow``: a DuckDB sink whose writes state a row bound, as the engine's small batches
do, so the frames reach DuckDB as Arrow rather than Parquet files. (``make_sink`` also opens
``delta-merge``: a Delta sink that MERGEs into every table, where ``delta`` rewrites the small
tables of the tests whole, ``replay.sinks.delta_rewrite``.)"""


class BoundedWrites:
    """A sink whose every write states ``rows_at_most`` (the engine's hint for small batches)."""

    def __init__(self, sink: Sink, rows_at_most: int = 1_000) -> None:
        self.sink, self.url, self.rows_at_most = sink, sink.url, rows_at_most

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)

    def replace(self, spec: Any, rows: Any, positions: Any, **bounds: Any) -> Any:
        guess = bounds.get("guess")
        return self.sink.replace(spec, rows, positions, rows_at_most=self.rows_at_most, guess=guess)

    def merge(self, spec: Any, changes: Any, positions: Any, *, rows_at_most: Any = None) -> Any:
        return self.sink.merge(spec, changes, positions, rows_at_most=self.rows_at_most)


@pytest.fixture
def make_sink(tmp_path: Path, spark: Any) -> Iterator[SinkFactory]:
    """Factory of a fresh sink of a kind (``SINK_KINDS``), closed after the test."""
    opened: list[Sink] = []

    def make(kind: str) -> Sink:
        base = kind.removesuffix("-arrow").removesuffix("-merge")
        target = tmp_path / f"{base}-{len(opened)}"
        if base == "duckdb":
            target = target.with_suffix(".duckdb")
        if kind == "delta-merge":
            opened.append(DeltaSink(target, spark, rewrite_bytes=0))
            return opened[-1]
        opened.append(open_sink(sink_url(base, target), spark))
        if kind != base:
            return BoundedWrites(opened[-1])
        return opened[-1]

    yield make
    for sink in opened:
        sink.close()


@pytest.fixture(params=SINK_KINDS)
def sink(request: pytest.FixtureRequest, make_sink: SinkFactory) -> Sink:
    """A fresh sink of each kind (the contract tests run over every backend)."""
    return make_sink(str(request.param))


@pytest.fixture
def changes(spark: Any) -> Callable[..., Any]:
    """Factory of a change DataFrame of the test table from :mod:`batches` tuples."""

    def make(*batch: Change) -> Any:
        return spark.createDataFrame(list(batch), CHANGE_SCHEMA)

    return make


@pytest.fixture
def rows(spark: Any) -> Callable[..., Any]:
    """Factory of a final-image DataFrame of the test table."""

    def make(*values: tuple[Any, ...]) -> Any:
        return spark.createDataFrame(list(values), ROW_SCHEMA)

    return make
