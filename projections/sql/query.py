"""The parts of a parsed SQL projection that its plans read: group keys, aggregates, output
columns, and :class:`ParsedProjection`, the view of the projection the plans need.

:mod:`projections.sql.parse` builds them; :mod:`projections.sql.state` and
:mod:`projections.sql.plan` read them through :class:`ParsedProjection`, so neither imports the
parser (which builds the plans).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from projections.sql.syntax import exp


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY expression and the stored column holding its value."""

    column: str
    sql: str
    node: exp.Expr = field(compare=False, repr=False)


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call: ``function`` (COUNT, SUM, AVG, MIN, MAX) of ``argument`` (None for
    ``COUNT(*)``), ``sql`` as written."""

    function: str
    argument: str | None
    sql: str
    node: exp.Expr = field(compare=False, repr=False)


@dataclass(frozen=True)
class OutputColumn:
    """A column of the projection as readers see it: ``name`` and its expression."""

    name: str
    sql: str
    node: exp.Expr = field(compare=False, repr=False)


class ParsedProjection(Protocol):
    """What a plan reads of a parsed projection (:class:`projections.SqlProjection` is one)."""

    @property
    def group_by(self) -> tuple[GroupKey, ...]: ...
    @property
    def aggregates(self) -> tuple[Aggregate, ...]: ...
    @property
    def columns(self) -> tuple[OutputColumn, ...]: ...
    @property
    def where(self) -> str | None: ...
    @property
    def having_node(self) -> exp.Expr | None: ...
    @property
    def reasons(self) -> tuple[str, ...]: ...

    def from_scratch_sql(self, dialect: str, sources: Mapping[str, str] | None = None) -> str:
        """The projection's own query in ``dialect``, reading ``sources`` instead."""
        ...
