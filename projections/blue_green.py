"""Blue/green versions of a projection: readers query a view named after the projection, which
selects from one stored version (``movie_tickets_sold`` over ``movie_tickets_sold__v2``).

A new version is built beside the served one (the engine replays into ``<name>__v<n>``), marked
ready when it has caught up, then swapped in by replacing the view: one statement, so readers
move atomically. The version it replaced stays until retired, so a rollback is one swap back.
This module is the state machine and the statements (DuckDB by default); the engine runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from projections.errors import ProjectionError
from projections.sql.syntax import DUCKDB, relation, render


class VersionPlan(Protocol):
    """What a version needs of a projection's plan (SQL plans have it)."""

    @property
    def tables(self) -> tuple[str, ...]: ...

    def visible_sql(self, dialect: str = ...) -> str: ...


def version_table(name: str, number: int) -> str:
    """The stored table of version ``number``: ``<name>__v<number>``."""
    return f"{name}__v{number}"


@dataclass(frozen=True)
class ProjectionVersion:
    """One version: its ``number``, the ``select`` readers get from it, the tables it owns."""

    number: int
    select: str
    tables: tuple[str, ...]
    ready: bool = False


@dataclass(frozen=True)
class BlueGreen:
    """The versions of projection ``name``, the one served (``active``) and the one a rollback
    returns to (``previous``). Methods return the new state and the statements to run."""

    name: str
    versions: tuple[ProjectionVersion, ...] = ()
    active: int | None = None
    previous: int | None = None
    dialect: str = DUCKDB

    @property
    def next_number(self) -> int:
        return max((v.number for v in self.versions), default=0) + 1

    def version(self, number: int) -> ProjectionVersion:
        for v in self.versions:
            if v.number == number:
                return v
        raise ProjectionError(f"projection {self.name} has no version {number}")

    def add(self, plan: VersionPlan) -> tuple[BlueGreen, ProjectionVersion]:
        """Register a version built by ``plan`` into ``version_table(name, next_number)``."""
        number = self.next_number
        if plan.tables[0] != version_table(self.name, number):
            raise ProjectionError(
                f"version {number} of {self.name} must be stored in "
                f"{version_table(self.name, number)}, not {plan.tables[0]}"
            )
        added = ProjectionVersion(number, plan.visible_sql(self.dialect), plan.tables)
        return replace(self, versions=(*self.versions, added)), added

    def mark_ready(self, number: int) -> BlueGreen:
        """The engine built version ``number`` up to the served version's positions."""
        ready = replace(self.version(number), ready=True)
        versions = tuple(ready if v.number == number else v for v in self.versions)
        return replace(self, versions=versions)

    def swap(self, number: int) -> tuple[BlueGreen, list[str]]:
        """Serve version ``number``: replace the readers' view."""
        target = self.version(number)
        if not target.ready:
            raise ProjectionError(f"version {number} of {self.name} is not ready to serve")
        if number == self.active:
            return self, []
        view = render(relation(self.name), self.dialect)
        statement = f"CREATE OR REPLACE VIEW {view} AS {target.select}"
        return replace(self, active=number, previous=self.active), [statement]

    def rollback(self) -> tuple[BlueGreen, list[str]]:
        """Serve the version served before the last swap again."""
        if self.previous is None:
            raise ProjectionError(f"projection {self.name} has no previous version to roll back to")
        state, statements = self.swap(self.previous)
        return replace(state, previous=None), statements

    def retire(self, number: int) -> tuple[BlueGreen, list[str]]:
        """Drop version ``number``'s tables (neither the served one nor the rollback target)."""
        if number in (self.active, self.previous):
            raise ProjectionError(
                f"version {number} of {self.name} is served or is the rollback target"
            )
        target = self.version(number)
        drops = [render(f"DROP TABLE IF EXISTS {relation(t)}", self.dialect) for t in target.tables]
        versions = tuple(v for v in self.versions if v.number != number)
        return replace(self, versions=versions), drops
