"""The directory of a RocksDB state store: recognising it, classifying errors, destroying it.

A directory is only ever used or deleted when every file in it is one RocksDB (or rocksdict)
makes, so a store URL pointing at the wrong directory never loses anyone's files.
"""

from __future__ import annotations

import json
import os
import re
import shutil

from cdc.state.errors import CorruptStateStoreError, StateStoreError

_ROCKSDB_FILE = re.compile(
    r"CURRENT|IDENTITY|LOCK|LOG(\.old\.\d+)?|(MANIFEST|OPTIONS)-\d+(\.dbtmp)?"
    r"|\d+\.(sst|log|blob|dbtmp)|rocksdict-config\.json"
)
_CONFIG = "rocksdict-config.json"


def _store_files(path: str) -> list[str] | None:
    """The files of the store directory (None if absent); StateStoreError if not a store's."""
    if not os.path.isabs(path):
        raise StateStoreError(f"a state store path must be absolute: {path!r}")
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path) or os.path.islink(path):
        raise StateStoreError(f"state store path {path} is not a directory")
    names = sorted(os.listdir(path))
    foreign = [n for n in names if not _ROCKSDB_FILE.fullmatch(n)]
    if foreign:
        raise StateStoreError(
            f"{path} holds files that are not a state store's ({', '.join(foreign[:3])}): "
            "refusing to use or delete it; give the store an empty or new directory"
        )
    return names


def check_store_directory(path: str) -> None:
    """Create the directory if absent; raise unless it is empty or holds a usable RocksDB."""
    names = _store_files(path)
    if names is None:
        os.makedirs(path)
        return
    if names and "CURRENT" not in names:
        raise CorruptStateStoreError(path, "RocksDB files without a CURRENT file")
    if _CONFIG in names:
        try:
            with open(os.path.join(path, _CONFIG), encoding="utf-8") as f:
                raw_mode = json.load(f).get("raw_mode")
        except (OSError, ValueError, AttributeError) as exc:
            raise CorruptStateStoreError(path, f"unreadable {_CONFIG}: {exc}") from exc
        if raw_mode is not True:
            raise CorruptStateStoreError(path, "a rocksdict database of python objects")


def destroy_store_directory(path: str) -> None:
    """Delete the store directory (nothing if absent; StateStoreError if not a store's)."""
    if _store_files(path) is not None:
        shutil.rmtree(path)
