"""Execution plans of SQL projections as SQL statements per dialect (DuckDB, Spark SQL on Delta).

A batch of changes reaches a projection as a relation of signed source rows (see
:mod:`projections.signed_rows`). :class:`IncrementalPlan` applies it in two steps, run in order in
one transaction: the value multisets of MIN/MAX arguments merge their per-value multiplicity
deltas, then the stored table merges the per-group deltas (``new = old + delta`` for ``__rows``,
counts and sums; MIN/MAX re-read from the multisets for the groups in the batch; a group whose
``__rows`` reaches 0 is deleted). A truncate runs :meth:`IncrementalPlan.reset_statements` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from projections.signed_rows import SIGN
from projections.sql.query import ParsedProjection
from projections.sql.state import MULT, ROWS, STATE, VALUE, Measure, StateLayout, visible_sql
from projections.sql.syntax import DUCKDB, quote, relation, render

SPARK_DIALECTS = frozenset({"spark", "spark2", "databricks"})
_SOURCE, _DELTA = "__s", "__d"


def _q(alias: str, column: str) -> str:
    return f"{quote(alias)}.{quote(column)}"


def _same_keys(keys: list[str], left: str, right: str) -> str:
    return " AND ".join(f"{_q(left, k)} IS NOT DISTINCT FROM {_q(right, k)}" for k in keys)


def _create(table: str, select: str, dialect: str, *, replace: bool = False) -> str:
    using = " USING DELTA" if dialect in SPARK_DIALECTS else ""
    head = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE IF NOT EXISTS"
    return render(f"{head} {relation(table)}{using} AS {select}", dialect)


@dataclass(frozen=True)
class IncrementalPlan:
    """How to keep ``projection`` in the stored ``table`` from batches of signed rows."""

    projection: ParsedProjection
    table: str
    layout: StateLayout = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layout", StateLayout.of(self.projection))

    @property
    def value_tables(self) -> dict[int, str]:
        """The multiset table of each MIN/MAX argument, by measure index."""
        return {m.index: f"{self.table}__values_{m.index}" for m in self._extremes}

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table the plan writes: the stored table, then the multisets."""
        return (self.table, *self.value_tables.values())

    @property
    def _extremes(self) -> list[Measure]:
        return [m for m in self.layout.measures if m.extremes]

    def _where(self, *extra: str) -> str:
        conditions = [f"({c})" for c in (self.projection.where, *extra) if c]
        return f" WHERE {' AND '.join(conditions)}" if conditions else ""

    def _keys_select(self) -> str:
        return ", ".join(f"{expr} AS {quote(column)}" for column, expr in self.layout.keys)

    def _group_by(self, *extra: str) -> str:
        exprs = [expr for _, expr in self.layout.keys] if self.layout.grouped else []
        exprs += list(extra)
        return f" GROUP BY {', '.join(exprs)}" if exprs else ""

    def _delta(self, signed: str) -> str:
        sign = quote(SIGN)
        items = [self._keys_select(), f"CAST(SUM({sign}) AS BIGINT) AS {quote(ROWS)}"]
        for m in self.layout.measures:
            if m.counted:
                counted = f"CASE WHEN ({m.argument}) IS NOT NULL THEN {sign} ELSE 0 END"
                items.append(f"CAST(SUM({counted}) AS BIGINT) AS {quote(m.count_column)}")
            if m.summed:
                items.append(f"COALESCE(SUM({sign} * ({m.argument})), 0) AS {quote(m.sum_column)}")
        # Without GROUP BY an aggregate yields a row even for no input: keep only real deltas.
        having = "" if self.layout.grouped else " HAVING COUNT(*) > 0"
        return (
            f"SELECT {', '.join(items)} FROM {relation(signed)}{self._where()}{self._group_by()}"
            f"{having}"
        )

    def _value_delta(self, m: Measure, signed: str) -> str:
        sign, arg = quote(SIGN), m.argument
        return (
            f"SELECT {self._keys_select()}, {arg} AS {quote(VALUE)}, "
            f"CAST(SUM({sign}) AS BIGINT) AS {quote(MULT)} FROM {relation(signed)}"
            f"{self._where(f'{arg} IS NOT NULL')}{self._group_by(arg)} HAVING SUM({sign}) <> 0"
        )

    def _delta_with_extremes(self, signed: str) -> str:
        keys = self.layout.key_columns
        sources = {c: _q(_DELTA, c) for c in self.layout.columns}
        joins = []
        for m in self._extremes:
            extremes = f"__e{m.index}"
            picked = ", ".join(_q(_DELTA, k) for k in keys)
            joins.append(
                f" LEFT JOIN (SELECT {picked}, MIN({_q('__m', VALUE)}) AS {quote('__min')}, "
                f"MAX({_q('__m', VALUE)}) AS {quote('__max')} FROM {quote(_DELTA)} JOIN "
                f"{relation(self.value_tables[m.index])} AS {quote('__m')} ON "
                f"{_same_keys(keys, _DELTA, '__m')} GROUP BY {picked}) AS {quote(extremes)} "
                f"ON {_same_keys(keys, _DELTA, extremes)}"
            )
            sources[m.min_column] = _q(extremes, "__min")
            sources[m.max_column] = _q(extremes, "__max")
        items = ", ".join(f"{sources[c]} AS {quote(c)}" for c in self.layout.columns)
        return (
            f"WITH {quote(_DELTA)} AS ({self._delta(signed)}) "
            f"SELECT {items} FROM {quote(_DELTA)}{''.join(joins)}"
        )

    def delta_sql(self, signed: str, dialect: str = DUCKDB) -> str:
        """Per group, the deltas of ``__rows``, counts and sums in the batch ``signed``."""
        return render(self._delta(signed), dialect)

    def value_delta_sql(self, index: int, signed: str, dialect: str = DUCKDB) -> str:
        """Per group and value, the multiplicity delta of MIN/MAX argument ``index``."""
        measure = next(m for m in self._extremes if m.index == index)
        return render(self._value_delta(measure, signed), dialect)

    def create_statements(self, signed: str, dialect: str = DUCKDB) -> list[str]:
        """Create the (empty) tables, typed by the signed-rows relation ``signed``."""
        statements = [
            _create(self.value_tables[m.index], f"{self._value_delta(m, signed)} LIMIT 0", dialect)
            for m in self._extremes
        ]
        select = f"SELECT * FROM ({self._delta_with_extremes(signed)}) AS __q LIMIT 0"
        return [*statements, _create(self.table, select, dialect)]

    def apply_statements(self, signed: str, dialect: str = DUCKDB) -> list[str]:
        """Merge one batch of signed rows: the multisets first, then the stored table."""
        statements = [self._merge_values(m, signed) for m in self._extremes]
        keys, columns = self.layout.key_columns, self.layout.columns
        additive = {ROWS} | {c for m in self.layout.measures for c in m.columns[:2]}
        additive -= {c for m in self.layout.measures for c in (m.min_column, m.max_column)}
        updates = ", ".join(
            f"{quote(c)} = {_q(STATE, c) + ' + ' if c in additive else ''}{_q(_SOURCE, c)}"
            for c in columns
            if c not in keys
        )
        statements.append(
            f"MERGE INTO {relation(self.table)} AS {quote(STATE)} USING "
            f"({self._delta_with_extremes(signed)}) AS {quote(_SOURCE)} "
            f"ON {_same_keys(keys, STATE, _SOURCE)} "
            f"WHEN MATCHED AND {_q(STATE, ROWS)} + {_q(_SOURCE, ROWS)} = 0 THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {updates} "
            f"WHEN NOT MATCHED AND {_q(_SOURCE, ROWS)} <> 0 THEN INSERT "
            f"({', '.join(quote(c) for c in columns)}) "
            f"VALUES ({', '.join(_q(_SOURCE, c) for c in columns)})"
        )
        return [render(s, dialect) for s in statements]

    def overwrite_statement(self, signed: str, dialect: str = DUCKDB) -> str:
        """The stored table's merge for a batch with a truncate, after the multisets' resets
        and merges: the table becomes the batch's groups alone, in one statement (on Delta one
        commit, where a reset then the merge would let readers see the emptied table)."""
        select = f"SELECT * FROM ({self._delta_with_extremes(signed)}) AS __q"
        return render(
            f"INSERT OVERWRITE TABLE {relation(self.table)} {select} WHERE {quote(ROWS)} <> 0",
            dialect,
        )

    def _merge_values(self, m: Measure, signed: str) -> str:
        keys = self.layout.key_columns
        columns = [*keys, VALUE, MULT]
        return (
            f"MERGE INTO {relation(self.value_tables[m.index])} AS {quote(STATE)} USING "
            f"({self._value_delta(m, signed)}) AS {quote(_SOURCE)} "
            f"ON {_same_keys(keys, STATE, _SOURCE)} AND {_q(STATE, VALUE)} = {_q(_SOURCE, VALUE)} "
            f"WHEN MATCHED AND {_q(STATE, MULT)} + {_q(_SOURCE, MULT)} = 0 THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {quote(MULT)} = {_q(STATE, MULT)} + {_q(_SOURCE, MULT)} "
            f"WHEN NOT MATCHED THEN INSERT ({', '.join(quote(c) for c in columns)}) "
            f"VALUES ({', '.join(_q(_SOURCE, c) for c in columns)})"
        )

    def reset_statements(self, dialect: str = DUCKDB) -> list[str]:
        """Clear every table (a truncate of the source table)."""
        return [render(f"DELETE FROM {relation(t)}", dialect) for t in self.tables]

    def drop_statements(self, dialect: str = DUCKDB) -> list[str]:
        """Drop every table of the plan (retiring a version)."""
        return [render(f"DROP TABLE IF EXISTS {relation(t)}", dialect) for t in self.tables]

    def visible_sql(self, dialect: str = DUCKDB) -> str:
        """The projection's columns as readers see them, computed from the stored table."""
        return render(visible_sql(self.projection, self.layout, relation(self.table)), dialect)

    def from_scratch_sql(
        self, dialect: str = DUCKDB, sources: Mapping[str, str] | None = None
    ) -> str:
        """The projection's own query (over ``sources`` renamed), to verify the stored state."""
        return self.projection.from_scratch_sql(dialect, sources)


@dataclass(frozen=True)
class RecomputePlan:
    """How to keep a projection declared ``maintain="recompute"``: rerun its query into
    ``table`` whenever one of its ``source_tables`` changes."""

    projection: ParsedProjection
    table: str

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.table,)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why it could not be incremental (empty when recompute was simply chosen)."""
        return self.projection.reasons

    def recompute_statements(
        self, dialect: str = DUCKDB, sources: Mapping[str, str] | None = None
    ) -> list[str]:
        """Replace the stored table with the query's result."""
        select = self.projection.from_scratch_sql(dialect, sources)
        using = " USING DELTA" if dialect in SPARK_DIALECTS else ""
        table = render(relation(self.table), dialect)
        return [f"CREATE OR REPLACE TABLE {table}{using} AS {select}"]

    def drop_statements(self, dialect: str = DUCKDB) -> list[str]:
        return [render(f"DROP TABLE IF EXISTS {relation(self.table)}", dialect)]

    def visible_sql(self, dialect: str = DUCKDB) -> str:
        return render(f"SELECT * FROM {relation(self.table)}", dialect)

    def from_scratch_sql(
        self, dialect: str = DUCKDB, sources: Mapping[str, str] | None = None
    ) -> str:
        return self.projection.from_scratch_sql(dialect, sources)
