"""The compaction tasks' key digests: equal for keys Spark groups as equal, a retried range's
replacing its first attempt's, and "repeated" wherever the digests cannot tell."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from replay.decode import key_tally
from replay.decode.key_tally import (
    Digests,
    KeyTally,
    digest_array,
    digests_accumulator,
    key_digest,
)


def test_keys_spark_groups_as_equal_have_one_digest() -> None:
    same = [
        ((0.0,), (-0.0,)),
        ((float("nan"),), (float("nan"),)),
        ((Decimal("1.50"),), (Decimal("1.5"),)),
        ((Decimal("0.00"),), (Decimal("-0"),)),
        ((datetime(2026, 1, 1, 12, tzinfo=UTC),),
         (datetime(2026, 1, 1, 14, tzinfo=timezone(timedelta(hours=2))),)),
        (("a", 1), ("a", 1)),
    ]  # fmt: skip
    for left, right in same:
        assert key_digest(left) == key_digest(right), (left, right)
        assert key_digest(left)[1]
    assert key_digest(("a", 1))[0] != key_digest(("a", 2))[0]
    assert key_digest(("1",))[0] != key_digest((1,))[0]
    assert key_digest((None,))[0] != key_digest(("None",))[0]


def test_a_nested_key_value_is_not_told_unique() -> None:
    digest, exact = key_digest(({"a": 1},))
    assert not exact
    assert KeyTally.of({("t", 0, 0): (_packed(digest), exact)}).repeated


def test_the_tally_finds_a_key_repeated_across_ranges() -> None:
    one, two, three = (key_digest((k,))[0] for k in ("one", "two", "three"))
    apart = {("t", 0, 0): (_packed(one, two), True), ("t", 1, 0): (_packed(three), True)}
    assert KeyTally.of(apart) == KeyTally(repeated=False, keys=3)
    repeated = {**apart, ("t", 2, 5): (_packed(two), True)}
    assert KeyTally.of(repeated) == KeyTally(repeated=True, keys=3)
    assert KeyTally.of({}) == KeyTally(repeated=False, keys=0)


def test_past_its_bound_the_tally_does_not_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_tally, "TALLIED_KEYS_AT_MOST", 2)
    three = {("t", 0, 0): (_packed(1, 2, 3), True)}
    assert KeyTally.of(three) == KeyTally(repeated=True, keys=3)


def _packed(*digests: int) -> bytes:
    found = digest_array()
    found.extend(digests)
    return found.tobytes()


def _add(accumulator: Any, digests: Digests) -> None:
    accumulator.add(digests)


def test_a_range_added_twice_counts_once(spark: Any) -> None:
    """Two tasks add the same range (as a retried task would): its digests count once."""
    accumulator = digests_accumulator(spark)
    same: Digests = {("t", 0, 0): (_packed(7, 8), True)}
    spark.sparkContext.parallelize([0, 1], 2).foreach(lambda _: _add(accumulator, same))
    assert accumulator.value == same
    assert KeyTally.taken(accumulator) == KeyTally(repeated=False, keys=2)
    assert accumulator.value == {}  # the session keeps the accumulator, not the digests
