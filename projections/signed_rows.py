"""Change batches as signed source rows, the input of a SQL projection's delta query.

Each change becomes source rows with ``__sign``: ``c``/``r`` add the after image (+1), ``u``
retracts the before image (-1) and adds the after image (+1), ``d`` retracts the before image
(-1), and ``t`` (a truncate) resets: the projection is cleared and only the changes after the
last truncate of the batch are signed. ``m`` (logical messages) carry no rows and are skipped.

Sign every change of a batch, in order, without keeping only the newest change per key: the
signs of one key's changes telescope to ``-first before + last after``. Updates and deletes need
the full before image (Debezium PostgreSQL sends it with ``REPLICA IDENTITY FULL``); otherwise
pass ``before_of``, a look-up of the previous row in the engine's mirror of the source table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from projections.change_ops import (
    CREATE,
    DELETE,
    READ,
    TRUNCATE,
    UPDATE,
    ChangeLike,
    Row,
    change_op,
    image,
    pick,
)
from projections.sql.syntax import quote, relation

SIGN = "__sign"
"""The sign column of signed rows: +1 for an added image, -1 for a retracted one."""


@dataclass
class SignedBatch:
    """A batch as signed rows; when ``reset`` the projection is cleared before they apply."""

    rows: list[Row] = field(default_factory=list)
    reset: bool = False


def signed_rows(
    changes: Iterable[ChangeLike],
    columns: Sequence[str],
    *,
    before_of: Callable[[ChangeLike], Row | None] | None = None,
) -> SignedBatch:
    """The signed rows (``columns`` plus ``__sign``) of a batch of changes, in order."""
    wanted = tuple(columns)
    batch = SignedBatch()
    for change in changes:
        op = change_op(change)
        if op == TRUNCATE:
            batch = SignedBatch(reset=True)
            continue
        if op in (UPDATE, DELETE):
            before = change.before if change.before is not None else _looked_up(change, before_of)
            batch.rows.append({**pick(before, wanted, "before"), SIGN: -1})
        if op in (CREATE, READ, UPDATE):
            batch.rows.append({**pick(image(change, "after"), wanted, "after"), SIGN: 1})
    return batch


def _looked_up(change: ChangeLike, before_of: Callable[[ChangeLike], Row | None] | None) -> Row:
    found = before_of(change) if before_of else None
    return found if found is not None else image(change, "before")


def signed_rows_sql(
    changes: str,
    columns: Sequence[str],
    *,
    op: str = "op",
    before: str = "before",
    after: str = "after",
) -> str:
    """Neutral SQL signing a relation of changes with an ``op`` column and ``before``/``after``
    struct columns (as Spark reads Debezium JSON); truncates must be split off beforehand."""

    def side(struct: str, sign: int, ops: str) -> str:
        picked = ", ".join(f"{quote(struct)}.{quote(c)} AS {quote(c)}" for c in columns)
        return (
            f"SELECT {picked}, {sign} AS {quote(SIGN)} FROM {relation(changes)} "
            f"WHERE {quote(op)} IN ({ops})"
        )

    retracted = side(before, -1, f"'{UPDATE}', '{DELETE}'")
    added = side(after, 1, f"'{CREATE}', '{READ}', '{UPDATE}'")
    return f"{retracted} UNION ALL {added}"


def snapshot_signed_sql(source: str, columns: Sequence[str]) -> str:
    """Neutral SQL reading a snapshot of the source table as signed rows (all +1)."""
    picked = ", ".join(quote(c) for c in columns)
    return f"SELECT {picked}, 1 AS {quote(SIGN)} FROM {relation(source)}"
