"""The one module that imports sqlglot: parsing user SQL, quoting, rendering per dialect.

Generated SQL is composed as text in sqlglot's neutral dialect (double-quoted identifiers,
``IS NOT DISTINCT FROM``, ``MERGE INTO``), then parsed back and written in the target dialect,
so every generated statement is checked by the parser and quoted the way the engine expects.
"""

from __future__ import annotations

import functools
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from projections.errors import ProjectionError

__all__ = [
    "DUCKDB",
    "SPARK",
    "canon",
    "exp",
    "neutral",
    "parse_expression",
    "parse_statement",
    "quote",
    "relation",
    "render",
]

DUCKDB: Final = "duckdb"
SPARK: Final = "spark"


def parse_statement(sql: str, dialect: str | None) -> exp.Expr:
    """One SQL statement as a sqlglot tree; a parse error or several statements raise."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as exc:
        raise ProjectionError(f"cannot parse the projection's SQL: {exc}") from None
    if len(statements) != 1:
        raise ProjectionError(f"a projection is one SQL statement, not {len(statements)}")
    return statements[0]


def parse_expression(sql: str, dialect: str | None = None) -> exp.Expr:
    """One SQL expression (a predicate, a column expression) as a sqlglot tree."""
    try:
        return sqlglot.parse_one(sql, read=dialect)
    except ParseError as exc:
        raise ProjectionError(f"cannot parse the expression {sql!r}: {exc}") from None


def quote(name: str) -> str:
    """A column or table name as a quoted identifier of the neutral dialect."""
    return exp.to_identifier(name, quoted=True).sql()


def relation(name: str) -> str:
    """A possibly qualified table name (``schema.table``) quoted part by part."""
    return ".".join(quote(part) for part in name.split("."))


def canon(node: exp.Expr) -> str:
    """A node's identity for matching expressions (identifiers normalized, qualifiers kept)."""
    return node.sql(normalize=True)


def neutral(node: exp.Expr) -> str:
    """A sqlglot tree as neutral-dialect SQL text (to compose into generated statements)."""
    return node.sql()


@functools.lru_cache(maxsize=1024)
def render(neutral_sql: str, dialect: str) -> str:
    """Neutral-dialect SQL written in ``dialect`` (``duckdb``, ``spark``, any sqlglot dialect);
    cached, since a plan renders the same statements for every batch."""
    return sqlglot.parse_one(neutral_sql).sql(dialect=dialect)
