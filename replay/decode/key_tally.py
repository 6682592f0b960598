"""Whether a rebuild's survivors repeat a primary key, told by the compaction tasks.

``compaction.survey`` counts the distinct primary keys of the decode in its query
(``repeated_keys.key_counts``): a ``count(DISTINCT ...)`` is two more shuffles, three more Spark
jobs on a cold driver (~0.8 s of a first 1 M rebuild). Where the tasks decode the survivors
themselves (``compacted_read.decoded_survivors``), each takes a 64-bit digest of every keyed
change's primary key (record key without one) into its range's findings (``task_survey``), sent
to the driver by an accumulator of one entry per range (``per_range_accumulator``: a retried
task's entry replaces its first attempt's). The driver then finds a repeated key, or none, among
them all.

The digests cover the changes the tasks decoded without an error, a superset of those the survey
keeps (the JVM may still reject a record without a source position), so a key told unique is
unique; a digest collision, or a key value whose equality in Spark its text may not show (a
nested value), makes the answer "repeated", and ``newest_per_key`` then picks the newest change
per key as before.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any, NamedTuple

from replay.spark import Accumulator, AccumulatorParam, SparkSession

RangeId = tuple[str, int, int]
"""A range of a plan: (topic, partition, start)."""
TALLIED_KEYS_AT_MOST = 4_000_000
"""Above this many keyed changes the driver does not look for a repeated digest (a set of them
would hold ~60 bytes per key): the answer is "repeated", as without a tally."""
_SCALARS = (str, int, bytes, bool, Decimal, float, date, time)
_PLAIN = (str, int)  # (``type(value) in``: a bool is not one)


class _MergedRanges(AccumulatorParam[dict[RangeId, Any]]):
    def zero(self, value: dict[RangeId, Any]) -> dict[RangeId, Any]:
        return {}

    def addInPlace(
        self, value1: dict[RangeId, Any], value2: dict[RangeId, Any]
    ) -> dict[RangeId, Any]:
        value1.update(value2)
        return value1


PerRange = Accumulator[dict[RangeId, Any]]
"""What one job's tasks found, per range: a retried task's entry replaces its first's."""


def per_range_accumulator(spark: SparkSession) -> PerRange:
    """An accumulator of one entry per range, for one job's tasks."""
    return spark.sparkContext.accumulator({}, _MergedRanges())


def key_digest(values: tuple[Any, ...]) -> tuple[int, bool]:
    """A primary key's 64-bit digest, and whether equal digests mean equal keys as Spark groups
    them (up to a collision): floats' zeros and NaNs, decimals' scales and zoned datetimes'
    zones made alike first."""
    if len(values) == 1 and type(values[0]) in _PLAIN:  # a key column of text or integers
        value = values[0]
        kind = type(value)
        text = b"s" + value.encode("utf-8", "surrogatepass") if kind is str else b"i%d" % value
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big"), True
    exact = True
    parts: list[Any] = []
    for value in values:
        kind = type(value)
        if kind is float:
            value = 0.0 if value == 0 else ("nan" if value != value else value)
        elif kind is Decimal:
            value = Decimal(0) if value == 0 else value.normalize()
        elif kind is datetime and value.tzinfo is not None:
            value = value.astimezone(UTC)
        elif value is not None and not isinstance(value, _SCALARS):
            exact = False
        parts.append(value)
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big"), exact


class KeyTally(NamedTuple):
    """What the digests of all ranges say."""

    repeated: bool
    """A primary key may have changes in several rows (False: none has)."""
    keys: int
    """How many distinct digests: the primary keys with changes, up to collisions."""

    @classmethod
    def of(cls, digests: Iterable[tuple[bytes, bool]]) -> KeyTally:
        """The tally of the ranges' digests (``array('Q')`` bytes, 8 per keyed change, and
        whether each is exact; ``keys``: the changes counted, at most ``TALLIED_KEYS_AT_MOST``
        or the digests are not compared)."""
        ranges = list(digests)
        count = sum(len(found) // 8 for found, _ in ranges)
        if count > TALLIED_KEYS_AT_MOST or not all(exact for _, exact in ranges):
            return cls(True, count)
        seen: set[int] = set()
        for found, _ in ranges:
            seen.update(array("Q", found))
        return cls(len(seen) < count, len(seen))


def digest_array() -> array[int]:
    """An empty array for one range's key digests (``KeyTally.of``)."""
    found = array("Q")
    assert found.itemsize == 8, "array('Q') of 8 bytes"
    return found
