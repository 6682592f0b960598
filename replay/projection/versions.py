"""Blue/green versions of a projection, run by the projection engine.

Readers use the projection's name: in DuckDB a view ``<name>`` over the served version's table;
in Delta the served version recorded in ``_replicator_projections/<name>.json`` (replaced by an
atomic rename), which :meth:`ProjectionVersions.read` resolves. A rebuild builds version N+1
beside the served N (``<name>__v<N+1>``, its own ledger), catches it up to the live end while
events keep arriving, brings N and N+1 to the same positions (the cut), verifies N+1 against N
(``replay.verify``: counts, checksum, first differing rows) and swaps: the view (or the recorded
version) changes in one transaction, so readers move atomically. N stays for :meth:`rollback`
until retired. The engine owns both versions during the rebuild: nothing else may advance N.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from cdc.streams.protocol import TopicPartition
from projections import BlueGreen, ProjectionVersion, SqlProjection, version_table
from projections.errors import ProjectionError
from projections.sql.syntax import relation, render
from replay.projection.engine import ProjectionEngine, ProjectionJob, ProjectionResult
from replay.reading.bounds import Bound, BoundKind
from replay.sinks.sql_projection import mirror_table
from replay.spark import DataFrame
from replay.verify import VerifyReport, verify_tables


@dataclass(frozen=True)
class _VersionPlan:
    tables: tuple[str, ...]
    select: dict[str, str]

    def visible_sql(self, dialect: str = "duckdb") -> str:
        return self.select[dialect]


@dataclass
class RebuildReport:
    version: int
    results: list[ProjectionResult]
    cut: dict[TopicPartition, int]
    verified: VerifyReport | None
    swapped: bool


def _state_json(state: BlueGreen) -> str:
    return json.dumps(asdict(state), sort_keys=True)


def _state_from(text: str) -> BlueGreen:
    raw: dict[str, Any] = json.loads(text)
    versions = tuple(
        ProjectionVersion(v["number"], v["select"], tuple(v["tables"]), v["ready"])
        for v in raw["versions"]
    )
    return BlueGreen(raw["name"], versions, raw["active"], raw["previous"], raw["dialect"])


class ProjectionVersions:
    """The versions of projection ``name`` in the engine's sink."""

    def __init__(self, engine: ProjectionEngine, name: str) -> None:
        self.engine, self.store, self.name = engine, engine.store, name

    def state(self) -> BlueGreen:
        text = self.store.load_state(self.name)
        return _state_from(text) if text else BlueGreen(self.name, dialect=self.store.dialect)

    def _plan(self, job: ProjectionJob) -> _VersionPlan:
        dialect = self.store.dialect
        if isinstance(job.definition, SqlProjection):
            plan = job.definition.check_incremental(job.table)
            tables = (*plan.tables, mirror_table(job.table))
            return _VersionPlan(tables, {dialect: plan.visible_sql(dialect)})
        select = render(f"SELECT * FROM {relation(job.table)}", dialect)
        return _VersionPlan((job.table,), {dialect: select})

    def serve(self, job: ProjectionJob) -> ProjectionResult:
        """Catch the served version up (creating and serving version 1 first if there is none);
        ``job.version`` is ignored."""
        state = self.state()
        if state.active is not None:
            return self.engine.run(job.at_version(state.active))
        if state.versions:  # a first build that did not finish: resume it
            job = job.at_version(state.versions[-1].number)
        else:
            job = job.at_version(state.next_number)
            self.store.drop(self._plan(job).tables)
            state, _ = state.add(self._plan(job))
            self.store.save_state(self.name, _state_json(state))
        result = self.engine.run(replace(job, rebuilding=True))
        if not self.store.positions(job.table):
            return result  # nothing applied yet (no row event): served once something is
        state, statements = state.mark_ready(job.version).swap(job.version)
        self.store.save_state(self.name, _state_json(state), statements)
        return result

    def rebuild(
        self, job: ProjectionJob, *, verify: bool = True, swap: bool = True
    ) -> RebuildReport:
        """Build the next version of the projection (``job.definition``, maybe changed) beside
        the served one, catch it up, verify it against the served one and swap (module doc)."""
        state = self.state()
        served = state.active
        new = job.at_version(state.next_number)
        self.store.drop(self._plan(new).tables)
        state, _ = state.add(self._plan(new))
        self.store.save_state(self.name, _state_json(state))
        results = [self.engine.run(replace(new, rebuilding=True))]
        cut = self._cut(new, served)
        report = None
        if served is not None:
            results.append(self.engine.run(replace(job.at_version(served), stop=_at(cut))))
            results.append(self.engine.run(replace(new, stop=_at(cut))))
            if verify:
                report = self.verify(served, new.version)
                if not report.equal:
                    return RebuildReport(new.version, results, cut, report, False)
        state = state.mark_ready(new.version)
        statements: list[str] = []
        if swap:
            state, statements = state.swap(new.version)
        self.store.save_state(self.name, _state_json(state), statements)
        return RebuildReport(new.version, results, cut, report, swap)

    def _cut(self, job: ProjectionJob, served: int | None) -> dict[TopicPartition, int]:
        """Where both versions meet: the topic's end now, or the served version's positions
        where they are further."""
        ahead = self.store.positions(version_table(self.name, served)) if served else {}
        cut = {}
        for partition in range(self.engine.stream.partition_count(job.topic)):
            tp = TopicPartition(job.topic, partition)
            cut[tp] = max(self.engine.stream.bounds(job.topic, partition).end, ahead.get(tp, 0))
        return cut

    def verify(self, left: int, right: int) -> VerifyReport:
        """Compare the visible rows of two versions."""
        a, b = self.read(left), self.read(right)
        return verify_tables(a, b, a.columns)

    def rollback(self) -> None:
        """Serve the version served before the last swap again (catch it up first with
        :meth:`serve`-like runs if it should reflect the latest events)."""
        state, statements = self.state().rollback()
        self.store.save_state(self.name, _state_json(state), statements)

    def retire(self, number: int) -> None:
        """Drop a version that is neither served nor the rollback target."""
        state, statements = self.state().retire(number)
        self.store.save_state(self.name, _state_json(state), statements)

    def read(self, number: int | None = None) -> DataFrame:
        """The visible rows of version ``number`` (default: the served one), as readers see
        them, as a Spark DataFrame."""
        state = self.state()
        number = state.active if number is None else number
        if number is None:
            raise ProjectionError(f"projection {self.name} has no served version")
        version = state.version(number)
        return self.store.frame(version.select, version.tables)

    def rows(self, number: int | None = None) -> list[tuple[Any, ...]]:
        """The visible rows of a version (default: the served one) as tuples."""
        state = self.state()
        number = state.active if number is None else number
        if number is None:
            raise ProjectionError(f"projection {self.name} has no served version")
        version = state.version(number)
        return self.store.query(version.select, version.tables)


def _at(cut: dict[TopicPartition, int]) -> Bound:
    return Bound(BoundKind.OFFSETS, offsets=cut)
