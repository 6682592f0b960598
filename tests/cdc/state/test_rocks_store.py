"""RocksDB store specifics: crash atomicity, corrupt or foreign directories, URLs."""

from __future__ import annotations

import glob
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import pytest

from cdc.state import (
    CorruptStateStoreError,
    StateStoreBusyError,
    StateStoreError,
    destroy_state_store,
    open_state_store,
)
from cdc.state.rocks_store import FORMAT_KEY, RocksStateStore
from cdc.streams.protocol import TopicPartition
from tests.cdc.state.crash_writer import CHANGELOG, small_keys, value_of

REPO_ROOT = Path(__file__).resolve().parents[3]
KEYS = 30_000


@pytest.mark.parametrize("trial", range(5))
def test_sigkill_during_apply_leaves_the_old_or_the_new_state(tmp_path: Path, trial: int) -> None:
    url = f"rocksdb://{tmp_path / 'store'}"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.cdc.state.crash_writer", url, str(KEYS)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    acknowledged = 0
    for line in child.stdout:
        acknowledged = int(line)
        if acknowledged > trial:
            break
    # kill at a random point of a later apply (most of a cycle is apply: batch, write, fsync)
    rng = random.Random(trial)
    for _ in range(rng.randrange(3)):
        acknowledged = int(child.stdout.readline())
    time.sleep(rng.uniform(0, 0.08))
    child.kill()  # SIGKILL
    child.wait()
    store = open_state_store(url)
    try:
        version = store.checkpoint()[CHANGELOG]
        assert version >= acknowledged
        big = list(store.scan("big"))
        assert len(big) == KEYS and {v for _, v in big} == {value_of(version)}
        assert {k for k, _ in store.scan("small")} == small_keys(version)
    finally:
        store.close()


def test_reopen_keeps_rows_and_checkpoint(tmp_path: Path) -> None:
    url = f"rocksdb://{tmp_path}/s?sync=false"
    store = open_state_store(url)
    store.apply({"t": {b"k": b"v"}}, {TopicPartition("c", 1): 3})
    store.close()
    again = open_state_store(url)
    assert again.get("t", b"k") == b"v" and again.checkpoint() == {TopicPartition("c", 1): 3}
    again.close()


def test_a_directory_with_other_files_is_never_used_or_deleted(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(StateStoreError, match=r"notes\.txt") as info:
        open_state_store(f"rocksdb://{tmp_path}")
    assert not isinstance(info.value, CorruptStateStoreError)
    with pytest.raises(StateStoreError, match="refusing"):
        destroy_state_store(f"rocksdb://{tmp_path}")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(StateStoreError, match="not a directory"):
        open_state_store(f"rocksdb://{tmp_path / 'notes.txt'}")


def _damaged(tmp_path: Path, damage: str) -> str:
    url = f"rocksdb://{tmp_path / 'store'}"
    store = cast(RocksStateStore, open_state_store(url))
    store.apply({"t": {i.to_bytes(4, "big"): b"x" * 100 for i in range(20_000)}}, {CHANGELOG: 1})
    live = store._db
    assert live is not None
    if damage == "no marker":
        live.delete(FORMAT_KEY)
    elif damage == "other format":
        live.put(FORMAT_KEY, b"something-else/3")
    live.flush()
    store.close()
    path = tmp_path / "store"
    if damage == "CURRENT":
        (path / "CURRENT").write_text("garbage\n")
    elif damage == "MANIFEST":
        for manifest in glob.glob(str(path / "MANIFEST-*")):
            Path(manifest).unlink()
    elif damage == "python objects":
        (path / "rocksdict-config.json").write_text(json.dumps({"raw_mode": False}))
    elif damage == "no CURRENT":
        (path / "CURRENT").unlink()
    elif damage == "SST block":
        sst = max(path.glob("*.sst"), key=lambda p: p.stat().st_size)
        data = bytearray(sst.read_bytes())
        data[1000:1100] = bytes(b ^ 0xFF for b in data[1000:1100])
        sst.write_bytes(bytes(data))
    return url


@pytest.mark.parametrize(
    "damage",
    [
        "no marker",
        "other format",
        "CURRENT",
        "MANIFEST",
        "python objects",
        "no CURRENT",
        "SST block",
    ],
)
def test_damage_is_detected_and_the_store_rebuilt(tmp_path: Path, damage: str) -> None:
    url = _damaged(tmp_path, damage)
    with pytest.raises(CorruptStateStoreError, match="rebuild"):
        store = open_state_store(url)
        try:  # a damaged block is only found when read
            list(store.scan("t"))
        finally:
            store.close()
    destroy_state_store(url)
    rebuilt = open_state_store(url)
    assert rebuilt.checkpoint() == {} and list(rebuilt.scan("t")) == []
    rebuilt.close()


def test_a_store_in_use_is_not_called_corrupt(tmp_path: Path) -> None:
    store = open_state_store(f"rocksdb://{tmp_path}")
    with pytest.raises(StateStoreError, match="another process") as info:
        open_state_store(f"rocksdb://{tmp_path}")
    assert isinstance(info.value, StateStoreBusyError)
    assert not isinstance(info.value, CorruptStateStoreError)
    store.close()


def test_relative_url_resolves_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_state_store("rocksdb://rel/store")
    store.close()
    assert (tmp_path / "rel" / "store").is_dir()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("rocksdb:relative", "absolute"),
        ("rocksdb:///tmp/x?sync=maybe", "sync=true|false"),
        ("rocksdb:///tmp/x?cache=1", "sync=true|false"),
        ("postgres://db", "unknown state store URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(StateStoreError, match=message):
        open_state_store(url)


def test_url_path_is_percent_decoded(tmp_path: Path) -> None:
    store = open_state_store(f"rocksdb://{tmp_path}/a%20b")
    store.close()
    assert (tmp_path / "a b" / "CURRENT").exists()
