"""A ``MERGE INTO`` statement taken apart, for an engine to apply it without its MERGE.

A Delta MERGE into a table of a file or two costs about ten Spark jobs; the same result as one
full outer join of the target and the source, written back by one overwrite, costs one
(``replay.sinks.delta_rewrite``). Taking the statement apart here keeps the projection plans'
single text form: the rewrite applies exactly the clauses the MERGE would.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from projections.errors import ProjectionError
from projections.sql.syntax import exp, parse_statement

MergeAction = Literal["delete", "update", "insert"]


@dataclass(frozen=True)
class MergeClause:
    """One ``WHEN [NOT] MATCHED [AND condition] THEN ...`` clause: ``values`` are the target
    columns it sets and their expressions (over the target's and the source's aliases)."""

    matched: bool
    condition: str | None
    action: MergeAction
    values: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MergeParts:
    """A MERGE of ``source`` (a query, aliased ``source_alias``; empty where the caller holds the
    source as a DataFrame) into the table ``target`` (aliased ``target_alias``) on ``on``; its
    ``clauses`` apply first-true, in order."""

    target: str
    target_alias: str
    source: str
    source_alias: str
    on: str
    clauses: tuple[MergeClause, ...]


@functools.lru_cache(maxsize=256)
def merge_parts(statement: str, dialect: str) -> MergeParts | None:
    """The parts of ``statement`` written in ``dialect``, or None if it is not a MERGE this takes
    apart: one into a plain table, whose clauses are ``WHEN [NOT] MATCHED`` with ``DELETE``,
    ``UPDATE SET column = ...`` or ``INSERT (columns) VALUES (...)`` (not ``BY SOURCE``, not
    ``*``). Cached: a plan's statements are the same every batch."""
    try:
        merge = parse_statement(statement, dialect)
    except ProjectionError:
        return None
    target, using, on = merge.args.get("this"), merge.args.get("using"), merge.args.get("on")
    whens = merge.args.get("whens")
    if not isinstance(merge, exp.Merge) or not isinstance(target, exp.Table) or on is None:
        return None
    if not target.alias or not using or not using.alias or whens is None:
        return None
    if not _plain_table(target):
        return None  # a qualified name: not the plain table name ``write`` resolves
    if isinstance(using, exp.Subquery) and not using.alias_column_names:
        source = using.this.sql(dialect=dialect)
    elif isinstance(using, exp.Table) and _plain_table(using):
        source = f"SELECT * FROM {exp.Table(this=using.this).sql(dialect=dialect)}"
    else:
        return None
    clauses = [_clause(when, dialect) for when in whens.expressions]
    if any(c is None for c in clauses):
        return None
    return MergeParts(
        target=target.name,
        target_alias=target.alias,
        source=source,
        source_alias=using.alias,
        on=on.sql(dialect=dialect),
        clauses=tuple(c for c in clauses if c is not None),
    )


def _plain_table(table: exp.Table) -> bool:
    """A table named by one identifier: no catalog or schema, no time travel, no column
    aliases (``AS s(a, b)``), nothing but the name and its alias."""
    extra = {k for k, v in table.args.items() if v} - {"this", "alias"}
    return not extra and not table.alias_column_names and isinstance(table.this, exp.Identifier)


def _pairs(
    columns: list[exp.Expr], values: list[exp.Expr], dialect: str
) -> tuple[tuple[str, str], ...] | None:
    """``(column, value)`` of an assignment list; None unless each column is a plain name,
    named once (``SET st.f`` of a struct field, a qualified name, is not taken apart)."""
    names = [c.name if isinstance(c, exp.Column) and len(c.parts) == 1 else "" for c in columns]
    folded = {n.lower() for n in names}
    if "" in names or len(folded) != len(names) or len(values) != len(names):
        return None
    return tuple((n, v.sql(dialect=dialect)) for n, v in zip(names, values, strict=True))


def _clause(when: exp.Expr, dialect: str) -> MergeClause | None:
    if not isinstance(when, exp.When) or when.args.get("source"):
        return None  # WHEN NOT MATCHED BY SOURCE: not taken apart
    matched, then = bool(when.args.get("matched")), when.args.get("then")
    found = when.args.get("condition")
    condition = None if found is None else found.sql(dialect=dialect)
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE" and matched:
        return MergeClause(True, condition, "delete")
    values: tuple[tuple[str, str], ...] | None = None
    if isinstance(then, exp.Update) and matched:
        sets = [e for e in then.expressions if isinstance(e, exp.EQ)]
        if len(sets) == len(then.expressions):
            values = _pairs([e.this for e in sets], [e.expression for e in sets], dialect)
        return None if values is None else MergeClause(True, condition, "update", values)
    if isinstance(then, exp.Insert) and not matched:
        names, inserted = then.this, then.expression
        if isinstance(names, exp.Tuple) and isinstance(inserted, exp.Tuple):  # not INSERT *
            values = _pairs(names.expressions, inserted.expressions, dialect)
        return None if values is None else MergeClause(False, condition, "insert", values)
    return None
