"""Reading a sink that does not exist creates nothing, on every sink: no database file, no
directory, not even the parent; only the first write does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay.projection.store import projection_store
from replay.sinks.ledger import VersionUnavailableError
from replay.sinks.registry import open_sink, sink_url
from tests.replay.sinks.batches import P0, SPEC, upsert
from tests.replay.sinks.conftest import BACKENDS

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("kind", BACKENDS)
def test_reading_a_missing_sink_creates_nothing_and_the_first_write_does(
    spark: Any, tmp_path: Path, kind: str, changes: Callable[..., Any]
) -> None:
    target = tmp_path / "typo" / ("out.duckdb" if kind == "duckdb" else "lake")
    sink = open_sink(sink_url(kind, target), spark)
    try:
        assert sink.tables() == []
        assert sink.positions("accounts") == {}
        assert sink.history("accounts") == []
        with pytest.raises(VersionUnavailableError, match="no table accounts"):
            sink.read("accounts")
        assert projection_store(sink).load_state("seeds") is None
        assert not (tmp_path / "typo").exists()

        sink.merge(SPEC, changes(upsert(1, "a", 1)), {P0: 2})
        assert sink.tables() == ["accounts"]
        assert sink.positions("accounts") == {P0: 2}
        assert target.exists()
    finally:
        sink.close()
