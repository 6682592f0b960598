"""The source mirror of a SQL projection, and the signed rows of a batch, as SQL per dialect.

``batch_changes`` keeps only the newest change per key of a batch, without its before image, so a
projection keeps its own copy of the source table (``<stored>__source``: the primary key, the
columns the query reads, ``__pos`` and ``__deleted``). A batch's signed rows are ``-old`` (the
mirror's row before the batch, if live) and ``+new`` (the batch's image, for an upsert), for the
changes newer than the mirror's row: a change at or below the stored ``__pos`` is a duplicate and
changes nothing. A delete leaves a tombstone (``__deleted``), so a late older upsert of the key
cannot bring it back (as in the replay sinks). A truncate clears the mirror with the projection.

The statements are written once in sqlglot's neutral dialect; the DuckDB sink runs them (a Delta
projection signs its batches on the driver, by the same rules: :mod:`replay.sinks.delta_mirror`).
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.signed_rows import SIGN
from projections.sql.syntax import quote, relation, render
from replay.sinks.protocol import OP, OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS

DELETED = "__deleted"
MIRROR_SUFFIX = "__source"


def mirror_table(stored: str) -> str:
    """The mirror of the source table kept beside the projection's stored table ``stored``."""
    return f"{stored}{MIRROR_SUFFIX}"


@dataclass(frozen=True)
class MirrorSql:
    """Statements on the mirror ``table`` (``keys`` then ``columns``) and a batch relation with
    those columns plus ``__op``/``__pos`` (the ``t`` marker row of a truncate is ignored)."""

    table: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]

    @classmethod
    def of(cls, stored: str, keys: tuple[str, ...], read: tuple[str, ...]) -> MirrorSql:
        """The mirror of a projection stored in ``stored`` that reads the columns ``read``."""
        return cls(mirror_table(stored), keys, tuple(c for c in read if c not in keys))

    @property
    def all_columns(self) -> tuple[str, ...]:
        return (*self.keys, *self.columns)

    def _on(self, left: str, right: str) -> str:
        return " AND ".join(
            f"{quote(left)}.{quote(k)} = {quote(right)}.{quote(k)}" for k in self.keys
        )

    def _changes(self, batch: str) -> str:
        picked = ", ".join(quote(c) for c in (*self.all_columns, OP, POS))
        return f"SELECT {picked} FROM {relation(batch)} WHERE {quote(OP)} <> '{OP_TRUNCATE}'"

    def create_sql(self, batch: str, dialect: str) -> str:
        """Create the (empty) mirror, typed by the batch relation."""
        picked = ", ".join(quote(c) for c in (*self.all_columns, POS))
        return render(
            f"CREATE TABLE IF NOT EXISTS {relation(self.table)} AS SELECT {picked}, "
            f"FALSE AS {quote(DELETED)} FROM {relation(batch)} LIMIT 0",
            dialect,
        )

    def signed_sql(self, batch: str, dialect: str) -> str:
        """The batch's signed rows (the mirror's columns plus ``__sign``), read before the mirror
        is merged."""
        b, m, e, pos = quote("__b"), quote("__m"), quote("__e"), quote(POS)
        gone = quote("__old_del")
        old = ", ".join(f"{m}.{quote(c)} AS {quote('__old_' + c)}" for c in self.all_columns)
        effective = (
            f"SELECT {b}.*, {old}, {m}.{quote(DELETED)} AS {gone} FROM ({self._changes(batch)}) "
            f"AS {b} LEFT JOIN {relation(self.table)} AS {m} ON {self._on('__b', '__m')} "
            f"WHERE {m}.{pos} IS NULL OR {b}.{pos} > {m}.{pos}"
        )
        retracted = ", ".join(f"{quote('__old_' + c)} AS {quote(c)}" for c in self.all_columns)
        added = ", ".join(quote(c) for c in self.all_columns)
        return render(
            f"WITH {e} AS ({effective}) "
            f"SELECT {retracted}, -1 AS {quote(SIGN)} FROM {e} WHERE {gone} IS NOT NULL AND NOT "
            f"{gone} UNION ALL SELECT {added}, 1 AS {quote(SIGN)} FROM {e} "
            f"WHERE {quote(OP)} = '{OP_UPSERT}'",
            dialect,
        )

    def merge_sql(self, batch: str, dialect: str) -> str:
        """Bring the mirror to the batch: newer changes win, deletes leave tombstones."""
        columns = (*self.all_columns, POS)
        deleted = f"{quote('__s')}.{quote(OP)} = '{OP_DELETE}'"
        sets = ", ".join(f"{quote(c)} = {quote('__s')}.{quote(c)}" for c in (*self.columns, POS))
        names = ", ".join(quote(c) for c in (*columns, DELETED))
        values = ", ".join(f"{quote('__s')}.{quote(c)}" for c in columns)
        return render(
            f"MERGE INTO {relation(self.table)} AS {quote('__m')} USING ({self._changes(batch)}) "
            f"AS {quote('__s')} ON {self._on('__m', '__s')} "
            f"WHEN MATCHED AND {quote('__s')}.{quote(POS)} > {quote('__m')}.{quote(POS)} THEN "
            f"UPDATE SET {sets}, {quote(DELETED)} = {deleted} "
            f"WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({values}, {deleted})",
            dialect,
        )

    def clear_sql(self, dialect: str) -> str:
        """Empty the mirror (a truncate of the source table)."""
        return render(f"DELETE FROM {relation(self.table)}", dialect)
