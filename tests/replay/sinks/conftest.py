"""Fixtures of the sink tests: sinks by kind, and DataFrames of change batches and rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.sinks.protocol import Sink
from replay.sinks.registry import open_sink, sink_url
from tests.replay.sinks.batches import CHANGE_SCHEMA, ROW_SCHEMA, Change, SinkFactory

SINK_KINDS = ("duckdb", "delta")


@pytest.fixture
def make_sink(tmp_path: Path, spark: Any) -> Iterator[SinkFactory]:
    """Factory of a fresh sink of a kind (``duckdb``/``delta``), closed after the test."""
    opened: list[Sink] = []

    def make(kind: str) -> Sink:
        target = tmp_path / f"{kind}-{len(opened)}"
        if kind == "duckdb":
            target = target.with_suffix(".duckdb")
        opened.append(open_sink(sink_url(kind, target), spark))
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
