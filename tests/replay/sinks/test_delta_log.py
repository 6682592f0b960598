"""The ledger read from a Delta log without listing it: from ``_last_checkpoint`` forward, the
newest ledger commit stepping over others, and the listing kept for a young log. The logs here
are written in the Delta protocol's JSON format by hand (a checkpoint needs ten real commits);
``test_delta_sink`` reads the logs Delta itself writes."""

from __future__ import annotations

import json
from pathlib import Path

from cdc.streams.protocol import TopicPartition
from replay.sinks.delta_log import commit_versions, data_file_count, latest_version, read_ledger
from replay.sinks.ledger import encode_metadata

P0 = TopicPartition("t", 0)


def commit(table_dir: Path, version: int, metadata: str | None) -> None:
    """One commit file: ``commitInfo`` first (as Delta writes it), then an action."""
    log = table_dir / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info: dict[str, object] = {"timestamp": 1_700_000_000_000 + version, "operation": "MERGE"}
    if metadata is not None:
        info["userMetadata"] = metadata
    lines = [json.dumps({"commitInfo": info}), json.dumps({"add": {"path": f"{version}.parquet"}})]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def test_the_newest_version_comes_from_the_checkpoint_forward(tmp_path: Path) -> None:
    table = tmp_path / "t"
    assert latest_version(table) is None and read_ledger("t", table, latest_only=True) == []
    for version in range(3):  # a young log, no checkpoint yet: listed
        commit(table, version, encode_metadata(version, "merge", {P0: version + 1}))
    assert latest_version(table) == 2
    for version in range(3, 25):
        commit(table, version, encode_metadata(version, "merge", {P0: version + 1}))
    (table / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 20, "size": 3}))
    # Cleanup removed the oldest commits: the forward walk does not need them.
    for version in range(0, 15):
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    assert latest_version(table) == max(commit_versions(table)) == 24
    (newest,) = read_ledger("t", table, latest_only=True)
    assert (newest.seq, newest.entry.version, newest.entry.positions) == (24, 24, {P0: 25})
    assert [e.entry.version for e in read_ledger("t", table)] == list(range(15, 25))


def test_commits_that_are_not_ledger_entries_are_stepped_over(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for version in range(12):
        commit(table, version, encode_metadata(version, "merge", {P0: version + 1}))
    (table / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 10}))
    commit(table, 12, None)  # a user's OPTIMIZE, say
    commit(table, 13, "not the replicator's metadata")
    assert latest_version(table) == 13
    (newest,) = read_ledger("t", table, latest_only=True)
    assert newest.entry.version == 11 and newest.entry.positions == {P0: 12}


def test_the_newest_entry_up_to_a_seq_is_read_back_from_the_newest_commit(
    tmp_path: Path,
) -> None:
    """A projection's auxiliary table after a crash: commits of a batch the master never
    committed (seq 7, 8) above the one to restore to (seq 6), an older log cleaned up."""
    table = tmp_path / "t"
    for version in range(9):
        commit(table, version, encode_metadata(version, "merge", {P0: version + 1}))
    (table / "_delta_log" / f"{0:020d}.json").unlink()
    (kept,) = read_ledger("t", table, latest_only=True, seq_at_most=6)
    assert (kept.seq, kept.entry.version) == (6, 6)
    assert read_ledger("t", table, latest_only=True, seq_at_most=0) == []  # cleaned up: none


def test_a_checkpoint_pointer_caught_mid_write_falls_back_to_the_listing(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for version in range(4):
        commit(table, version, encode_metadata(version, "merge", {P0: version + 1}))
    (table / "_delta_log" / "_last_checkpoint").write_text('{"vers')
    assert latest_version(table) == 3
    assert read_ledger("t", table, latest_only=True)[0].entry.version == 3


def test_the_data_file_count_comes_from_the_newest_checksum(tmp_path: Path) -> None:
    table = tmp_path / "t"
    assert data_file_count(table) is None  # no table
    commit(table, 0, None)
    assert data_file_count(table) is None  # no checksum (yet)
    log = table / "_delta_log"
    checksum = {"txnId": "x", "tableSizeBytes": 0, "numFiles": 0, "metadata": {"numFiles": 7}}
    (log / f"{0:020d}.crc").write_text(json.dumps(checksum))
    assert data_file_count(table) == 0
    commit(table, 1, None)  # the newest version's checksum is what counts
    assert data_file_count(table) is None
    nested = {"txnId": "y", "metadata": {"numFiles": 7}, "numFiles": 3}
    (log / f"{1:020d}.crc").write_text(json.dumps(nested))
    assert data_file_count(table) is None  # only a top-level count before any nested object
    (log / f"{1:020d}.crc").write_text(json.dumps({"tableSizeBytes": 9, "numFiles": 3}))
    assert data_file_count(table) == 3
