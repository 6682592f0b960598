"""The newest change of every primary key when some keys survived in several partitions.

After ``compaction.latest_records`` a key has one change per partition it was written to; in a
topic that was repartitioned (or written with another key than the primary key) a primary key can
survive in several, and the table keeps the image with the highest ``__pos``.
"""

from __future__ import annotations

from replay.decode.changes import KEY
from replay.decode.schema import TopicSchema
from replay.sinks.protocol import POS
from replay.spark import Column, DataFrame, F, named_column

_COPIES = "__copies"

REPEATED_KEYS_BROADCAST = 100_000
"""At most this many primary keys found in several partitions are broadcast to pick their newest
change; more go through a shuffled hash join."""


def key_counts(schema: TopicSchema, rows: Column) -> tuple[Column, Column]:
    """Aggregates over the rows where ``rows`` holds: how many, and how many distinct primary
    keys (record keys without one; null parts equal, as ``newest_per_key`` groups them). As
    many keys as rows: no key is repeated, and ``newest_per_key`` would return those rows as
    they are. Part of a query that reads the rows anyway (``compaction.survey``): a job less."""
    names = list(schema.primary_key) or [KEY]
    key = F.struct(*(named_column(n) for n in names))  # a struct is never null: every row counts
    return F.count(F.when(rows, True)), F.count_distinct(F.when(rows, key))


def newest_per_key(decoded: DataFrame, schema: TopicSchema) -> DataFrame:
    """The change with the highest ``__pos`` of every primary key (record key without one).

    After ``latest_records`` a key has one change unless it survived in several partitions
    (a repartitioned topic). A Spark job (a hash aggregation of the keys: persist ``decoded``
    first) counts those keys: with none, ``decoded`` is the answer as it is; otherwise only they
    go through the ``max_by`` aggregation, whose variable-length buffer sorts every row it sees
    (a 9 M-key rebuild ran out of memory sorting them all), and the others pass through an anti
    join against them: broadcast up to ``REPEATED_KEYS_BROADCAST`` keys, else shuffled hash
    (rows shuffled, not sorted). Keys compare null-safe. With repeated keys their aggregation
    runs again for the join (not cached: the frame outlives this call; such keys are rare)."""
    names = list(schema.primary_key) or [KEY]
    copies = decoded.groupBy(*names).agg(F.count(F.lit(1)).alias(_COPIES))
    repeated = copies.where(F.col(_COPIES) > 1).select(*(F.col(n).alias(f"__r_{n}") for n in names))
    found = repeated.limit(REPEATED_KEYS_BROADCAST + 1).count()
    if not found:
        return decoded
    same = [decoded[n].eqNullSafe(F.col(f"__r_{n}")) for n in names]
    on = same[0]
    for condition in same[1:]:
        on &= condition
    if found <= REPEATED_KEYS_BROADCAST:
        repeated = F.broadcast(repeated)
    else:
        repeated = repeated.hint("shuffle_hash")
    single = decoded.join(repeated, on, "left_anti")
    several = decoded.join(repeated, on, "left_semi")
    newest = F.max_by(F.struct(*decoded.columns), F.col(POS)).alias("newest")
    return single.unionByName(several.groupBy(*names).agg(newest).select("newest.*"))
