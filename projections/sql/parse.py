"""SQL projections: ``CREATE TABLE name AS SELECT ... GROUP BY ...`` parsed into group keys,
aggregates and a row predicate, and checked for incremental maintenance.

Expressions are kept over the source table's bare column names (table qualifiers removed), in
sqlglot's neutral dialect; :mod:`projections.sql.plan` turns them into per-dialect SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from projections.errors import ProjectionError, ProjectionNotIncrementalError
from projections.sql.checks import SUPPORTED_AGGREGATES, query_reasons
from projections.sql.plan import IncrementalPlan, RecomputePlan
from projections.sql.query import Aggregate, GroupKey, OutputColumn
from projections.sql.syntax import DUCKDB, canon, exp, parse_statement

Maintain = Literal["incremental", "recompute"]
_NO_AGGREGATE = (
    "it has no GROUP BY and no aggregate: a SQL projection aggregates rows (for a filtered "
    "copy of the table use an SCD type 1 projection)"
)


@dataclass(frozen=True)
class SqlProjection:
    """A read model defined by one SQL query over one source table (see :meth:`parse`)."""

    name: str
    sql: str
    source_table: str
    source_tables: tuple[str, ...]
    group_by: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    columns: tuple[OutputColumn, ...]
    where: str | None
    having: str | None
    source_columns: tuple[str, ...]
    reasons: tuple[str, ...]
    """Why the query cannot be maintained incrementally (empty when it can)."""
    maintain: Maintain
    dialect: str | None
    query: exp.Query = field(compare=False, repr=False)
    where_node: exp.Expr | None = field(compare=False, repr=False)
    having_node: exp.Expr | None = field(compare=False, repr=False)

    @classmethod
    def parse(
        cls,
        sql: str,
        *,
        name: str | None = None,
        maintain: Maintain = "incremental",
        dialect: str | None = None,
    ) -> SqlProjection:
        """Parse ``CREATE [OR REPLACE] TABLE|VIEW name AS SELECT ...`` (or a bare SELECT with
        ``name``). Invalid SQL raises :class:`ProjectionError`; a query that is valid but not
        incrementally maintainable parses, and :meth:`check_incremental` says why."""
        if maintain not in ("incremental", "recompute"):
            raise ProjectionError(f'maintain is "incremental" or "recompute", not {maintain!r}')
        statement = parse_statement(sql, dialect)
        if isinstance(statement, exp.Create):
            if not isinstance(statement.expression, exp.Query):
                raise ProjectionError("CREATE ... AS needs a SELECT")
            target = statement.this.find(exp.Table)
            name = name or (target.name if target else None)
            query = statement.expression
        elif isinstance(statement, exp.Query):
            query = statement
        else:
            raise ProjectionError(
                "a projection is CREATE TABLE|VIEW name AS SELECT ..., or a SELECT"
            )
        if not name:
            raise ProjectionError("a projection needs a name: CREATE TABLE <name> AS, or name=")
        derived = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
        tables = tuple(
            dict.fromkeys(
                _table_name(t) for t in query.find_all(exp.Table) if t.name.lower() not in derived
            )
        )
        if not tables:
            raise ProjectionError("the projection reads no table")
        reasons = query_reasons(query)
        if reasons or not isinstance(query, exp.Select):
            where = query.args.get("where") if isinstance(query, exp.Select) else None
            return cls(
                name, sql, tables[0], tables, (), (), (), where.this.sql() if where else None,
                None, (), tuple(reasons), maintain, dialect, query, None, None,
            )  # fmt: skip
        return _analyse(cls, name, sql, query, maintain, dialect)

    def check_incremental(self, table: str | None = None) -> IncrementalPlan | RecomputePlan:
        """The plan maintaining this projection into ``table`` (default ``<name>__v1``): the
        incremental plan, or with ``maintain="recompute"`` the recompute plan; a query that
        cannot be maintained incrementally raises :class:`ProjectionNotIncrementalError`."""
        stored = table or f"{self.name}__v1"
        if self.maintain == "recompute":
            return RecomputePlan(self, stored)
        if self.reasons:
            raise ProjectionNotIncrementalError(self.name, self.reasons)
        return IncrementalPlan(self, stored)

    def from_scratch_sql(
        self, dialect: str = DUCKDB, sources: Mapping[str, str] | None = None
    ) -> str:
        """The projection's own query in ``dialect``, reading ``sources[table]`` instead of
        each source table named there (the verification of an incremental state)."""
        query = self.query.copy()
        for table in list(query.find_all(exp.Table)):
            replacement = (sources or {}).get(_table_name(table))
            if replacement is not None:
                renamed = exp.to_table(replacement)
                alias = table.args.get("alias") or exp.TableAlias(
                    this=exp.to_identifier(table.name)
                )
                renamed.set("alias", alias)
                table.replace(renamed)
        return query.sql(dialect=dialect)


def _table_name(table: exp.Table) -> str:
    return ".".join(part.name for part in table.parts)


def _analyse(
    cls: type[SqlProjection],
    name: str,
    sql: str,
    query: exp.Select,
    maintain: Maintain,
    dialect: str | None,
) -> SqlProjection:
    source = query.args["from_"].this
    qualifiers = {source.name.lower(), source.alias_or_name.lower()}
    outputs = _outputs(query, qualifiers)
    keys = _group_keys(query, outputs, qualifiers)
    key_canons = {canon(k.node) for k in keys}
    where = query.args.get("where")
    where_node = _bare(where.this, qualifiers) if where else None
    having = query.args.get("having")
    having_node = _bare(_aliases_resolved(having.this, outputs), qualifiers) if having else None
    if where_node is not None and where_node.find(exp.AggFunc):
        raise ProjectionError("WHERE cannot use aggregates (use HAVING)")
    if any(k.node.find(exp.AggFunc) for k in keys):
        raise ProjectionError("GROUP BY cannot use aggregates")
    aggregates: dict[str, Aggregate] = {}
    aggregated = [o.node for o in outputs] + ([having_node] if having_node else [])
    for node in aggregated:
        for agg in node.find_all(*SUPPORTED_AGGREGATES):
            argument = None if isinstance(agg.this, exp.Star) else agg.this
            aggregates.setdefault(canon(agg), Aggregate(
                type(agg).__name__.upper(), argument.sql() if argument else None, agg.sql(), agg,
            ))  # fmt: skip
    reasons = () if aggregates or query.args.get("group") else (_NO_AGGREGATE,)
    for node in aggregated if not reasons else []:
        _check_grouped(node, key_canons)
    used = [where_node, *(k.node for k in keys), *(a.node for a in aggregates.values())]
    columns = sorted({c.name for n in used if n is not None for c in n.find_all(exp.Column)})
    if "__sign" in columns:
        raise ProjectionError("a source column named __sign clashes with the signed rows' sign")
    return cls(
        name, sql, _table_name(source), (_table_name(source),), keys,
        tuple(aggregates.values()), outputs, where_node.sql() if where_node else None,
        having_node.sql() if having_node else None, tuple(columns), reasons, maintain, dialect,
        query, where_node, having_node,
    )  # fmt: skip


def _bare(node: exp.Expr, qualifiers: set[str]) -> exp.Expr:
    """A copy of ``node`` whose columns are bare source column names."""
    node = node.copy()
    for column in node.find_all(exp.Column):
        if column.table and column.table.lower() not in qualifiers:
            raise ProjectionError(f"column {column.sql()} names a table the query does not read")
        for part in ("table", "db", "catalog"):
            column.set(part, None)
    return node


def _outputs(query: exp.Select, qualifiers: set[str]) -> tuple[OutputColumn, ...]:
    outputs: list[OutputColumn] = []
    for position, item in enumerate(query.expressions, 1):
        if isinstance(item, exp.Alias):
            name, node = item.alias, item.this
        elif isinstance(item, exp.Column):
            name, node = item.name, item
        else:
            raise ProjectionError(f"select item {position} ({item.sql()}) needs a name: AS <name>")
        if name.startswith("__"):
            raise ProjectionError(f"column {name}: names starting with __ are reserved")
        if any(o.name.lower() == name.lower() for o in outputs):
            raise ProjectionError(f"two select items are named {name}")
        bare = _bare(node, qualifiers)
        outputs.append(OutputColumn(name, bare.sql(), bare))
    return tuple(outputs)


def _group_keys(
    query: exp.Select, outputs: tuple[OutputColumn, ...], qualifiers: set[str]
) -> tuple[GroupKey, ...]:
    group = query.args.get("group")
    nodes: list[exp.Expr] = []
    for item in group.expressions if group else []:
        nodes.append(_group_item(item, outputs, qualifiers))
    keys: dict[str, GroupKey] = {}
    for node in nodes:
        named = [o.name for o in outputs if canon(o.node) == canon(node)]
        column = named[0] if named else f"__key_{len(keys)}"
        keys.setdefault(canon(node), GroupKey(column, node.sql(), node))
    return tuple(keys.values())


def _group_item(
    item: exp.Expr, outputs: tuple[OutputColumn, ...], qualifiers: set[str]
) -> exp.Expr:
    if isinstance(item, exp.Literal) and not item.is_string:
        position = int(item.name)
        if not 1 <= position <= len(outputs):
            raise ProjectionError(f"GROUP BY {position} is not a select item position")
        return outputs[position - 1].node
    if isinstance(item, exp.Column) and not item.table:
        aliased = [o for o in outputs if o.name.lower() == item.name.lower()]
        if aliased and canon(aliased[0].node) != canon(item):
            if any(
                c.name.lower() == item.name.lower() for c in aliased[0].node.find_all(exp.Column)
            ):
                raise ProjectionError(
                    f"GROUP BY {item.name} names both a select alias and a source column: group "
                    "by the expression or its position instead"
                )
            return aliased[0].node
    return _bare(item, qualifiers)


def _aliases_resolved(node: exp.Expr, outputs: tuple[OutputColumn, ...]) -> exp.Expr:
    """``node`` (a HAVING condition) with references to computed select items replaced."""
    computed = {o.name.lower(): o.node for o in outputs if not isinstance(o.node, exp.Column)}

    def resolve(part: exp.Expr) -> exp.Expr:
        if isinstance(part, exp.Column) and not part.table and part.name.lower() in computed:
            return computed[part.name.lower()].copy()
        return part

    return node.copy().transform(resolve)


def _check_grouped(node: exp.Expr, key_canons: set[str]) -> None:
    """Raise when ``node`` uses a column outside aggregates and GROUP BY expressions."""
    if canon(node) in key_canons or isinstance(node, exp.AggFunc):
        return
    if isinstance(node, exp.Column):
        raise ProjectionError(f"column {node.sql()} must appear in GROUP BY or in an aggregate")
    for child in node.iter_expressions():
        _check_grouped(child, key_canons)
