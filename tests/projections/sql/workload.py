"""Random change workloads on a ``movie_ticket_sales`` source table, and the projections the SQL
tests maintain from them (shared by the DuckDB and Spark tests)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from projections.change_ops import RowChange

SOURCE = "movie_ticket_sales"
COLUMNS = ("id", "title", "region", "total_ticket_value", "seats", "refunded")
SOURCE_DDL = (
    f"CREATE TABLE {SOURCE} (id INTEGER, title VARCHAR, region VARCHAR, "
    "total_ticket_value DECIMAL(10, 2), seats INTEGER, refunded BOOLEAN)"
)

SEED = (
    "CREATE TABLE movie_tickets_sold AS SELECT title, COUNT(total_ticket_value) AS tickets_sold "
    "FROM movie_ticket_sales GROUP BY title"
)
PROJECTIONS = {
    "seed": SEED,
    "multi_key": (
        "CREATE TABLE sales_by_title_region AS SELECT title, region, COUNT(*) AS sales, "
        "SUM(total_ticket_value) AS revenue, AVG(seats) AS avg_seats, "
        "MIN(total_ticket_value) AS cheapest, MAX(seats) AS most_seats "
        "FROM movie_ticket_sales WHERE NOT refunded GROUP BY title, region"
    ),
    "expressions": (
        "CREATE TABLE seat_value AS SELECT UPPER(region) AS region_code, "
        "SUM(s.total_ticket_value * s.seats) AS seat_value, COUNT(seats) AS counted, "
        "MIN(title) AS first_title, MAX(title) AS last_title, "
        "AVG(total_ticket_value) AS avg_value FROM movie_ticket_sales AS s "
        "WHERE s.seats > 1 OR s.seats IS NULL GROUP BY UPPER(region)"
    ),
    "global": (
        "CREATE TABLE totals AS SELECT COUNT(*) AS sales, SUM(seats) AS seats, "
        "AVG(total_ticket_value) AS avg_value, MIN(seats) AS fewest, "
        "MAX(total_ticket_value) AS dearest FROM movie_ticket_sales WHERE region IS NOT NULL"
    ),
    "having": (
        "CREATE TABLE busy_titles AS SELECT title, SUM(seats) * 1.0 / COUNT(*) AS seats_per_sale, "
        "COALESCE(SUM(total_ticket_value), 0) AS revenue, MAX(seats) - MIN(seats) AS spread "
        "FROM movie_ticket_sales GROUP BY 1 HAVING COUNT(*) > 1"
    ),
    "hidden_key": (
        "CREATE TABLE per_region AS SELECT COUNT(*) AS sales, MAX(title) AS last_title "
        "FROM movie_ticket_sales GROUP BY region"
    ),
}

_TITLES = st.sampled_from(["Dune", "Heat", "Zodiac", "dune"]) | st.none()
_REGIONS = st.sampled_from(["eu", "us", "EU"]) | st.none()
_VALUES = st.sampled_from([Decimal("9.50"), Decimal("12.00"), Decimal("0.00"), Decimal("45.25")])
_ROW = st.fixed_dictionaries(
    {
        "title": _TITLES,
        "region": _REGIONS,
        "total_ticket_value": _VALUES | st.none(),
        "seats": st.integers(0, 4) | st.none(),
        "refunded": st.booleans() | st.none(),
    }
)
_OP = st.one_of(
    st.tuples(st.just("insert"), _ROW),
    st.tuples(st.just("update"), st.integers(0, 50), _ROW),
    st.tuples(st.just("update_key_only"), st.integers(0, 50), _TITLES),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("truncate")),
)
WORKLOADS = st.lists(st.lists(_OP, max_size=12), min_size=1, max_size=6)
"""Batches of operations on the source table (selectors pick existing rows)."""


@dataclass
class SourceMirror:
    """The source table in Python, turning operations into changes with before/after images."""

    rows: dict[int, dict[str, Any]]
    next_id: int = 1

    def changes(self, ops: list[tuple[Any, ...]]) -> list[RowChange]:
        changes: list[RowChange] = []
        for op in ops:
            ids = sorted(self.rows)
            if op[0] == "insert":
                row = {"id": self.next_id, **op[1]}
                self.next_id += 1
                self.rows[row["id"]] = row
                changes.append(RowChange("c", None, dict(row)))
            elif op[0] == "truncate":
                self.rows.clear()
                changes.append(RowChange("t", None, None))
            elif ids and op[0] in ("update", "update_key_only"):
                before = self.rows[ids[op[1] % len(ids)]]
                new = dict(op[2]) if op[0] == "update" else {"title": op[2]}
                after = {**before, **new}
                self.rows[after["id"]] = after
                changes.append(RowChange("u", dict(before), dict(after)))
            elif ids and op[0] == "delete":
                before = self.rows.pop(ids[op[1] % len(ids)])
                changes.append(RowChange("d", dict(before), None))
        return changes


def normalized(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows as a sorted multiset, floats rounded (AVG is sum/count on one side)."""

    def value(v: Any) -> Any:
        return float(f"{v:.9g}") if isinstance(v, float) else v

    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)
