"""The replicator's ledger as recorded in a Delta table's transaction log.

Each ledger write is a Delta commit whose ``commitInfo.userMetadata`` is the JSON of
:func:`replay.sinks.ledger.encode_metadata`. Reading it from the commit files of ``_delta_log``
(the JSON format of the open Delta protocol: one ``<version:020d>.json`` per commit, actions one
per line) costs no Spark job, which matters because every write checks the ledger first. The
entries available are those of the commits still in the log (see ``delta.logRetentionDuration``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.sinks.ledger import decode_metadata
from replay.sinks.protocol import LedgerEntry

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
# A checksum's top-level file count: before the first nested object (its ``metadata``), so a
# checksum that lists the files themselves need not be read whole.
_CHECKSUM_FILES = re.compile(r'^\{[^{]*"numFiles"\s*:\s*(\d+)')


@dataclass(frozen=True)
class DeltaLedgerEntry:
    """A ledger entry plus the write sequence number (the Delta ``txnVersion``) it was made with."""

    seq: int
    entry: LedgerEntry
    metadata: str


def commit_versions(table_dir: Path) -> list[int]:
    """The versions whose commit files are in the table's log, ascending."""
    log = table_dir / "_delta_log"
    if not log.is_dir():
        return []
    found = (_COMMIT_FILE.match(p.name) for p in log.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def latest_version(table_dir: Path) -> int | None:
    """The newest version in the table's log (None: no commit yet), without listing the log:
    from the version ``_last_checkpoint`` names, forward commit file by commit file. A log keeps
    30 days of commits by default (``delta.logRetentionDuration``): ~2.6 M files for a table a
    ``--follow`` writes every second, which every round would otherwise list."""
    log = table_dir / "_delta_log"
    version = _checkpoint_version(log)
    if version is None:  # no checkpoint yet: a young log (one every 10 commits by default)
        versions = commit_versions(table_dir)
        return versions[-1] if versions else None
    while (log / f"{version + 1:020d}.json").is_file():
        version += 1
    return version


def data_file_count(table_dir: Path) -> int | None:
    """How many data files the table's newest version has, from its checksum file
    (``<version>.crc``, which Delta writes after each commit); None when that is not known (no
    table, no checksum yet, or one being written)."""
    checksum = _newest_checksum_file(table_dir)
    if checksum is None:
        return None
    try:
        with checksum.open(encoding="utf-8") as file:
            head = file.read(4096)
    except (OSError, ValueError):  # absent, or caught mid-write
        return None
    found = _CHECKSUM_FILES.match(head)
    return int(found.group(1)) if found else None


def newest_checksum(table_dir: Path) -> dict[str, Any] | None:
    """The checksum file of the table's newest version (``<version>.crc``: file count, size,
    metadata with the table properties, protocol); None when there is none (yet) to read."""
    checksum = _newest_checksum_file(table_dir)
    if checksum is None:
        return None
    try:
        found = json.loads(checksum.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or caught mid-write
        return None
    return found if isinstance(found, dict) else None


def _newest_checksum_file(table_dir: Path) -> Path | None:
    """Where the checksum of the table's newest version is (or will be); None: no commit yet."""
    version = latest_version(table_dir)
    return None if version is None else table_dir / "_delta_log" / f"{version:020d}.crc"


def newest_operation(table_dir: Path) -> str | None:
    """The operation (``WRITE``, ``MERGE``, ``RESTORE``, ...) of the table's newest commit, from
    its ``commitInfo``; None when the table has no commit (or no ``commitInfo``)."""
    version = latest_version(table_dir)
    if version is None:
        return None
    for info in _commit_infos(table_dir / "_delta_log" / f"{version:020d}.json"):
        return str(info.get("operation"))
    return None


def _checkpoint_version(log: Path) -> int | None:
    try:
        return int(json.loads((log / "_last_checkpoint").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, or caught mid-write: the caller lists the log instead


def read_ledger(
    table: str, table_dir: Path, *, latest_only: bool = False, seq_at_most: int | None = None
) -> list[DeltaLedgerEntry]:
    """The table's ledger entries, oldest first (only the newest one if ``latest_only``, read
    back from the newest commit: the newest with a seq of at most ``seq_at_most`` if given)."""
    if latest_only:
        return _newest_entry(table, table_dir, seq_at_most)
    versions = commit_versions(table_dir)
    entries: list[DeltaLedgerEntry] = []
    for version in reversed(versions):
        found = _entry(table, table_dir, version)
        if found is not None:
            entries.append(found)
            if latest_only:
                break
    return entries[::-1]


def _newest_entry(table: str, table_dir: Path, seq_at_most: int | None) -> list[DeltaLedgerEntry]:
    """The newest commit that is a ledger entry (others, e.g. a user's OPTIMIZE, stepped over)."""
    version = latest_version(table_dir)
    log = table_dir / "_delta_log"
    while version is not None and version >= 0 and (log / f"{version:020d}.json").is_file():
        found = _entry(table, table_dir, version)
        if found is not None and (seq_at_most is None or found.seq <= seq_at_most):
            return [found]
        version -= 1
    return []


def _entry(table: str, table_dir: Path, version: int) -> DeltaLedgerEntry | None:
    for info in _commit_infos(table_dir / "_delta_log" / f"{version:020d}.json"):
        metadata = info.get("userMetadata")
        decoded = decode_metadata(metadata)
        if decoded is None:
            return None
        seq, mode, positions = decoded
        at_ms = int(info.get("inCommitTimestamp") or info.get("timestamp") or 0)
        entry = LedgerEntry(table, version, positions, at_ms, mode)
        return DeltaLedgerEntry(seq, entry, str(metadata))
    return None


def _commit_infos(commit_file: Path) -> Iterator[dict[str, Any]]:
    """The ``commitInfo`` action of a commit file (Delta writes it first, so this reads little)."""
    with commit_file.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith('{"commitInfo"'):
                action = json.loads(line)["commitInfo"]
                if isinstance(action, dict):
                    yield action
                return
