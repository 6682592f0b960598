"""Where projections are stored: the sink-specific executor of their batches and versions.

:class:`ProjectionStore` is what the projection engine and the blue/green steps need of a sink;
:func:`projection_store` gives the one of a DuckDB or Delta sink.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cdc.streams.protocol import TopicPartition
from projections import IncrementalPlan
from replay.sinks.protocol import LedgerEntry, Positions, Sink
from replay.sinks.sql_projection import MirrorSql
from replay.spark import DataFrame


class ProjectionStore(Protocol):
    dialect: str
    """The SQL dialect of the store's statements (``duckdb`` or ``spark``)."""
    batch_on_driver: bool
    """Whether ``apply_sql`` holds a batch's rows on the driver (signs them in Python): a batch
    must then stay within the job's ``batch_offsets``, a first build included."""

    def positions(self, table: str) -> dict[TopicPartition, int]:
        """The positions the projection stored in ``table`` reflects (empty: none)."""
        ...

    def apply_sql(
        self, plan: IncrementalPlan, mirror: MirrorSql, batch: DataFrame, positions: Positions,
        *, rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply one batch of changes to a SQL projection with its ledger entry, exactly once
        (``rows_at_most``: a bound on the batch's rows, as for ``Sink.merge``)."""
        ...

    def apply_rows(
        self,
        table: str,
        identity: Sequence[str],
        rows: DataFrame,
        truncated: bool,
        positions: Positions,
        *,
        rows_at_most: int | None = None,
    ) -> LedgerEntry | None:
        """Apply row upserts/deletes (``__op``) with the ledger entry, exactly once."""
        ...

    def load_state(self, name: str) -> str | None: ...

    def save_state(self, name: str, state: str, statements: Sequence[str] = ()) -> None:
        """Store the blue/green state of ``name`` with its statements, atomically for readers."""
        ...

    def query(self, select: str, tables: Sequence[str] = ()) -> list[tuple[Any, ...]]: ...

    def frame(self, select: str, tables: Sequence[str] = ()) -> DataFrame: ...

    def drop(self, tables: Sequence[str]) -> None: ...


def projection_store(sink: Sink) -> ProjectionStore:
    """The projection store of a DuckDB or Delta sink."""
    if sink.url.startswith("duckdb://"):
        from replay.sinks.duckdb_projection import DuckDBProjectionStore
        from replay.sinks.duckdb_sink import DuckDBSink

        assert isinstance(sink, DuckDBSink)
        return DuckDBProjectionStore(sink)
    if sink.url.startswith("delta://"):
        from replay.sinks.delta_projection import DeltaProjectionStore
        from replay.sinks.delta_sink import DeltaSink

        assert isinstance(sink, DeltaSink)
        return DeltaProjectionStore(sink)
    raise ValueError(f"no projection store for sink {sink.url}")
