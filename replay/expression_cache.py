"""Spark column expressions built once per owner (a schema, a table) and reused.

Building a PySpark expression costs round trips into the JVM (several per ``F.col`` or
``F.when``): the plans of a small ``--follow`` round made ~2,800 of them, about half of the
round's driver time. Expressions name their columns (they are resolved against each frame they
are used in), so the ones built for a topic's schema serve every batch of that topic. They live
in the session's JVM: a new session builds them again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from replay.spark import SparkSession

V = TypeVar("V")


class ExpressionCache(Generic[V]):
    """At most ``size`` built values, keyed by an owner object (held, compared by identity)
    and a hashable ``detail``; the least recently used go first. Thread-safe."""

    def __init__(self, size: int = 32) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[int, Hashable], tuple[Any, SparkSession, V]]
        self._entries = OrderedDict()
        self._lock = threading.Lock()

    def get(self, owner: object, detail: Hashable, build: Callable[[], V]) -> V:
        """The value built for (``owner``, ``detail``) in the active session, built by
        ``build`` on a miss (not kept when no session is active)."""
        session = SparkSession.getActiveSession()
        if session is None:
            return build()
        key = (id(owner), detail)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] is owner and hit[1] is session:
                self._entries.move_to_end(key)
                return hit[2]
        value = build()
        with self._lock:
            self._entries[key] = (owner, session, value)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value
