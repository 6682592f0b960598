"""Child process of the crash test: applies ever-newer versions of a state until killed.

Apply ``i`` writes value ``i`` to every key of table ``big``, and clears table ``small`` and
writes ten new keys ``i-0``..``i-9`` into it, at checkpoint ``i``; it prints ``i`` once the
apply returned. ``python -m tests.cdc.state.crash_writer <url> <keys>``
"""

from __future__ import annotations

import itertools
import sys

from cdc.state import open_state_store
from cdc.streams.protocol import TopicPartition

CHANGELOG = TopicPartition("changelog", 0)


def value_of(version: int) -> bytes:
    """The value every ``big`` key has at ``version``."""
    return str(version).encode() * 8


def small_keys(version: int) -> set[bytes]:
    """The keys of ``small`` at ``version``."""
    return {f"{version}-{j}".encode() for j in range(10)}


def main() -> None:
    """Apply versions 1, 2, ... until killed."""
    url, keys = sys.argv[1], int(sys.argv[2])
    store = open_state_store(url)
    for version in itertools.count(1):
        value = value_of(version)
        writes = {
            "big": {k.to_bytes(4, "big"): value for k in range(keys)},
            "small": dict.fromkeys(small_keys(version), value),
        }
        store.apply(writes, {CHANGELOG: version}, frozenset({"small"}))
        print(version, flush=True)


if __name__ == "__main__":
    main()
