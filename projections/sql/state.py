"""The stored state of a SQL projection, and the visible view computed from it.

The stored table has one row per group with at least one source row:

- the group keys, each under its output name (or ``__key_<i>`` when not selected; a query without
  GROUP BY has the one key ``__all``, always TRUE);
- ``__rows``: the group's source rows passing WHERE; the group is deleted when it reaches 0;
- per distinct aggregate argument ``i`` (shared: ``SUM(x)``, ``AVG(x)`` and ``COUNT(x)`` use the
  same columns): ``__count_<i>`` (non-null values, for COUNT/SUM/AVG), ``__sum_<i>`` (sum of the
  non-null values, 0 when none), ``__min_<i>``/``__max_<i>`` (for MIN/MAX).

Reads follow SQL: COUNT(*) is ``__rows``; COUNT(x) ignores NULLs; SUM and AVG of only NULLs are
NULL (``__count_<i> = 0``); AVG is ``__sum_<i> / __count_<i>``. MIN/MAX values come from the
multiset table ``<table>__values_<i>`` (group keys, ``__value``, ``__mult``), so deleting the
current extreme finds the next one. The visible view is the user's select list (and HAVING) with
every aggregate replaced by its read expression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from projections.sql.query import Aggregate, ParsedProjection
from projections.sql.syntax import canon, exp, neutral, parse_expression, quote

ROWS: Final = "__rows"
GLOBAL_KEY: Final = "__all"
VALUE: Final = "__value"
MULT: Final = "__mult"
STATE: Final = "__t"
"""The alias of the stored table in the visible view and in the merge."""


@dataclass(frozen=True)
class Measure:
    """The state kept for one distinct aggregate argument."""

    index: int
    argument: str
    counted: bool = False
    summed: bool = False
    minimum: bool = False
    maximum: bool = False

    @property
    def count_column(self) -> str:
        return f"__count_{self.index}"

    @property
    def sum_column(self) -> str:
        return f"__sum_{self.index}"

    @property
    def min_column(self) -> str:
        return f"__min_{self.index}"

    @property
    def max_column(self) -> str:
        return f"__max_{self.index}"

    @property
    def extremes(self) -> bool:
        """True when MIN or MAX of the argument is kept (through a multiset table)."""
        return self.minimum or self.maximum

    @property
    def columns(self) -> list[str]:
        """The stored columns of this measure, in table order."""
        flags = (self.counted, self.summed, self.minimum, self.maximum)
        names = (self.count_column, self.sum_column, self.min_column, self.max_column)
        return [name for flag, name in zip(flags, names, strict=True) if flag]


@dataclass(frozen=True)
class StateLayout:
    """Stored columns of a projection: ``keys`` (column, neutral SQL) and ``measures``."""

    keys: tuple[tuple[str, str], ...]
    measures: tuple[Measure, ...]
    grouped: bool

    @classmethod
    def of(cls, projection: ParsedProjection) -> StateLayout:
        """The layout of ``projection``'s stored table."""
        keys = tuple((k.column, k.sql) for k in projection.group_by) or ((GLOBAL_KEY, "TRUE"),)
        flags: dict[str, dict[str, bool]] = {}
        for agg in projection.aggregates:
            if agg.argument is None:
                continue
            wanted = flags.setdefault(agg.argument, {})
            if agg.function in ("COUNT", "SUM", "AVG"):
                wanted["counted"] = True
            if agg.function in ("SUM", "AVG"):
                wanted["summed"] = True
            if agg.function in ("MIN", "MAX"):
                wanted["minimum" if agg.function == "MIN" else "maximum"] = True
        measures = tuple(Measure(i, arg, **f) for i, (arg, f) in enumerate(flags.items()))
        return cls(keys, measures, bool(projection.group_by))

    @property
    def key_columns(self) -> list[str]:
        return [column for column, _ in self.keys]

    @property
    def columns(self) -> list[str]:
        """Every stored column, in table order."""
        return [*self.key_columns, ROWS, *(c for m in self.measures for c in m.columns)]

    def measure(self, argument: str) -> Measure:
        return next(m for m in self.measures if m.argument == argument)

    def read(self, agg: Aggregate) -> str:
        """Neutral SQL reading ``agg`` from the stored row aliased ``__t``."""
        if agg.argument is None:
            return self._count(f"{quote(STATE)}.{quote(ROWS)}")
        m = self.measure(agg.argument)
        count, total = (f"{quote(STATE)}.{quote(c)}" for c in (m.count_column, m.sum_column))
        if agg.function == "COUNT":
            return self._count(count)
        if agg.function in ("SUM", "AVG"):
            value = total if agg.function == "SUM" else f"{total} / {count}"
            return f"CASE WHEN {count} = 0 THEN NULL ELSE {value} END"
        column = m.min_column if agg.function == "MIN" else m.max_column
        return f"{quote(STATE)}.{quote(column)}"

    def _count(self, column: str) -> str:
        # Without GROUP BY the view left-joins the state, which is empty for an empty source.
        return column if self.grouped else f"COALESCE({column}, 0)"


def visible_sql(projection: ParsedProjection, layout: StateLayout, table: str) -> str:
    """Neutral SQL of the projection's visible columns, read from the stored ``table``."""
    replacements: dict[str, exp.Expr] = {}
    for agg in projection.aggregates:
        replacements[canon(agg.node)] = parse_expression(layout.read(agg))
    for key in projection.group_by:
        replacements[canon(key.node)] = exp.column(key.column, STATE, quoted=True)

    def substitute(node: exp.Expr) -> exp.Expr:
        found = replacements.get(canon(node))
        return found.copy() if found is not None else node

    items = ", ".join(
        f"{neutral(c.node.copy().transform(substitute))} AS {quote(c.name)}"
        for c in projection.columns
    )
    stored = f"{table} AS {quote(STATE)}"
    if not layout.grouped:
        unit = f"(SELECT TRUE AS {quote(GLOBAL_KEY)}) AS {quote('__unit')}"
        stored = f"{unit} LEFT JOIN {stored} ON TRUE"
    sql = f"SELECT {items} FROM {stored}"
    if projection.having_node is not None:
        sql += f" WHERE {neutral(projection.having_node.copy().transform(substitute))}"
    return sql
