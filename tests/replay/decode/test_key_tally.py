"""The compaction tasks' key digests: equal for keys Spark groups as equal, and "repeated"
wherever the digests cannot tell (a retried range's entry: ``test_task_survey``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from replay.decode import key_tally
from replay.decode.key_tally import KeyTally, digest_array, key_digest


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
    assert KeyTally.of([(_packed(digest), exact)]).repeated


def test_the_tally_finds_a_key_repeated_across_ranges() -> None:
    one, two, three = (key_digest((k,))[0] for k in ("one", "two", "three"))
    apart = [(_packed(one, two), True), (_packed(three), True)]
    assert KeyTally.of(apart) == KeyTally(repeated=False, keys=3)
    repeated = [*apart, (_packed(two), True)]
    assert KeyTally.of(repeated) == KeyTally(repeated=True, keys=3)
    assert KeyTally.of([]) == KeyTally(repeated=False, keys=0)


def test_past_its_bound_the_tally_does_not_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_tally, "TALLIED_KEYS_AT_MOST", 2)
    three = [(_packed(1, 2, 3), True)]
    assert KeyTally.of(three) == KeyTally(repeated=True, keys=3)


def _packed(*digests: int) -> bytes:
    found = digest_array()
    found.extend(digests)
    return found.tobytes()
