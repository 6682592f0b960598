"""Expressions are built once per owner, detail and session, and rebuilt for another owner."""

from __future__ import annotations

from typing import Any

import pytest

from replay.expression_cache import ExpressionCache
from replay.spark import F

pytestmark = pytest.mark.integration


def test_built_once_per_owner_and_detail(spark: Any) -> None:
    cache: ExpressionCache[Any] = ExpressionCache(size=2)
    owner, other = object(), object()
    builds: list[str] = []

    def build(name: str) -> Any:
        builds.append(name)
        return F.col(name) + 1

    first = cache.get(owner, "a", lambda: build("a"))
    assert cache.get(owner, "a", lambda: build("a")) is first
    assert cache.get(other, "a", lambda: build("a")) is not first
    assert builds == ["a", "a"]
    frame = spark.createDataFrame([(1,), (2,)], "a int")
    assert [r[0] for r in frame.select(first).collect()] == [2, 3]  # usable on any frame
    cache.get(owner, "b", lambda: build("b"))  # a third entry: the least recently used goes
    cache.get(owner, "a", lambda: build("a"))
    assert builds == ["a", "a", "b", "a"]
