"""Helpers shared by the local log tests: opening logs, writing and reading transactions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cdc.streams.local import LocalLog, LocalLogSettings

FAST = LocalLogSettings(sync=False, lock_timeout_s=10.0, poll_interval_s=0.01)
"""Settings for tests: no fsync (nothing here loses power; kill -9 keeps the page cache)."""


def open_log(path: Path | str, **changes: Any) -> LocalLog:
    """A handle on the log in ``path`` with test settings plus ``changes``."""
    return LocalLog(str(path), replace(FAST, **changes))


def write_txn(
    log: LocalLog,
    topic: str,
    rows: Sequence[tuple[int, bytes | None, bytes | None]],
    txn_id: str = "t",
) -> None:
    """Commit ``rows`` of (partition, key, value) in one transaction."""
    writer = log.writer(txn_id)
    writer.begin()
    for partition, key, value in rows:
        writer.send(topic, key, value, partition=partition)
    writer.commit()
    writer.close()


def contents(log: LocalLog, topic: str) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """Every committed (offset, key, value) of every partition of ``topic``."""
    return {
        p: [(r.offset, r.key, r.value) for r in log.read(topic, p, 0)]
        for p in range(log.partition_count(topic))
    }


def file_sizes(directory: Path) -> dict[str, int]:
    """Sizes of the segment and index files under ``directory`` by relative path."""
    return {
        str(path.relative_to(directory)): path.stat().st_size
        for path in directory.rglob("*")
        if path.is_file() and path.suffix in (".log", ".idx") and path.name != "journal.log"
    } | {"journal.log": os.path.getsize(directory / "journal.log")}
