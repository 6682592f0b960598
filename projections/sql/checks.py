"""Why a SQL query cannot be maintained incrementally from changes: one reason per feature.

A projection is maintained by retracting old row images and adding new ones to per-group
counts and sums, so it must read one table, row by row, deterministically, and aggregate with
COUNT, SUM, AVG, MIN or MAX (MIN/MAX through a multiset of values per group).
"""

from __future__ import annotations

from typing import Final

from projections.sql.syntax import exp

SUPPORTED_AGGREGATES: Final = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)

NON_DETERMINISTIC_NAMES: Final = frozenset(
    {
        "now", "random", "rand", "randn", "uuid", "gen_random_uuid", "uuid_generate_v4",
        "newid", "nextval", "setseed", "getdate", "sysdate", "systimestamp", "localtimestamp",
        "localtime", "today", "current_timestamp", "current_date", "current_time",
        "monotonically_increasing_id", "spark_partition_id", "input_file_name", "shuffle",
        "uniform", "random_bytes", "unix_timestamp", "get_current_time", "transaction_timestamp",
        "statement_timestamp", "clock_timestamp",
    }
)  # fmt: skip
_NON_DETERMINISTIC_CLASSES: Final = (exp.Rand, exp.Randn, exp.Randstr, exp.Uuid)


def query_reasons(query: exp.Expr) -> list[str]:
    """Reasons that ``query`` (the SELECT of a projection) is not incrementally maintainable."""
    if not isinstance(query, exp.Select):
        kind = type(query).__name__.upper()
        return [f"{kind} combines several queries: each side would need its own state"]
    reasons = _clause_reasons(query)
    seen: set[str] = set()
    for node in query.walk():
        reason = node_reason(node, query)
        if reason and reason not in seen:
            seen.add(reason)
            reasons.append(reason)
    return reasons


def _clause_reasons(query: exp.Select) -> list[str]:
    reasons = []
    source = query.args.get("from_")
    if query.args.get("joins"):
        reasons.append(
            "it joins several tables: a change on one side needs the matching rows of the "
            "other side, which the projection does not keep"
        )
    if source is None:
        reasons.append("it reads no table")
    elif not isinstance(source.this, exp.Table) or source.this.args.get("joins"):
        reasons.append(f"it reads from {source.this.sql()}, not from one table")
    if query.args.get("with_"):
        reasons.append("WITH (common table expressions) reads derived tables, not one table")
    if query.args.get("distinct"):
        reasons.append("SELECT DISTINCT: write GROUP BY over the selected columns instead")
    if query.args.get("order"):
        reasons.append("ORDER BY: a table keeps no order (order when reading the projection)")
    if query.args.get("limit") or query.args.get("offset"):
        reasons.append(
            "LIMIT/OFFSET keeps some rows only: when one leaves, the next one would be needed"
        )
    if query.args.get("qualify"):
        reasons.append("QUALIFY filters on window functions")
    group = query.args.get("group")
    grouping = (exp.Rollup, exp.Cube, exp.GroupingSets)
    if group and (group.find(*grouping) or any(group.args.get(k) for k in ("rollup", "cube"))):
        reasons.append("ROLLUP/CUBE/GROUPING SETS group each row several times")
    if any(isinstance(e, exp.Star) for e in query.expressions):
        reasons.append("SELECT * has no aggregate: a projection aggregates rows")
    return reasons


def node_reason(node: exp.Expr, query: exp.Select) -> str | None:
    """Why one node of ``query`` prevents incremental maintenance, or None."""
    if isinstance(node, exp.Window):
        return (
            f"{node.sql()} is a window function: one changed row can change the result of "
            "every row of its window"
        )
    if isinstance(node, exp.Select | exp.Subquery | exp.Exists) and node is not query:
        if node.find_ancestor(exp.CTE, exp.From):
            return None  # a derived table: the FROM/WITH reason says it
        return f"the subquery in {_context(node)} reads other rows than the changed one"
    if isinstance(node, exp.Lateral | exp.Unnest | exp.Pivot):
        return f"{node.sql()} turns one row into several in ways the projection cannot retract"
    if isinstance(node, exp.Filter):
        return (
            f"{node.sql()}: FILTER clauses are not supported (put the condition in a CASE "
            "inside the aggregate)"
        )
    if _non_deterministic(node):
        return (
            f"{node.sql()} is not deterministic: the same changes replayed would give another "
            "result, and a retraction would not cancel the addition"
        )
    if isinstance(node, exp.AggFunc):
        return _aggregate_reason(node)
    return None


def _aggregate_reason(node: exp.AggFunc) -> str | None:
    if not isinstance(node, SUPPORTED_AGGREGATES):
        return (
            f"{node.sql()} is not one of COUNT, SUM, AVG, MIN, MAX (the aggregates kept from "
            "counts, sums and value multisets)"
        )
    if isinstance(node.this, exp.Distinct) or node.args.get("distinct"):
        return (
            f"{node.sql()} needs the set of distinct values per group, not a count or sum that "
            "a retraction can subtract from"
        )
    if node.expressions:
        return f"{node.sql()} takes several arguments"
    if any(isinstance(inner, exp.AggFunc) for inner in node.walk() if inner is not node):
        return f"{node.sql()} nests aggregates"
    return None


def _non_deterministic(node: exp.Expr) -> bool:
    if isinstance(node, _NON_DETERMINISTIC_CLASSES):
        return True
    if type(node).__name__.startswith("Current"):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in NON_DETERMINISTIC_NAMES


def _context(node: exp.Expr) -> str:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Where | exp.Having | exp.From):
        if isinstance(parent, exp.Select):
            return "the select list"
        parent = parent.parent
    if parent is None:
        return "the query"
    return {"Where": "WHERE", "Having": "HAVING", "From": "FROM"}[type(parent).__name__]
