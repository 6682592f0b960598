"""The sink-independent rules: ledger planning, commit metadata, column checks, sink URLs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.errors import ChangeEventError
from cdc.streams.protocol import TopicPartition
from replay.sinks.delta_log import read_ledger
from replay.sinks.ledger import (
    PositionsRegressedError,
    decode_metadata,
    encode_metadata,
    plan_positions,
)
from replay.sinks.merge_rules import change_columns, row_columns
from replay.sinks.protocol import TableSpec
from replay.sinks.registry import sink_path, sink_url

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
SPEC = TableSpec("t", ("id",))


def test_a_table_without_ledger_takes_any_write() -> None:
    assert plan_positions("t", "merge", None, {}) == {}
    assert plan_positions("t", "replace", None, {A0: 3}) == {A0: 3}


@pytest.mark.parametrize("mode", ["merge", "replace"])
@pytest.mark.parametrize("incoming", [{}, {A0: 5}, {A0: 5, A1: 2}, {A0: 1, A1: 0}])
def test_writes_the_ledger_covers_are_skipped(
    mode: str, incoming: dict[TopicPartition, int]
) -> None:
    assert plan_positions("t", mode, {A0: 5, A1: 2}, incoming) is None


def test_a_merge_advances_the_stored_positions() -> None:
    assert plan_positions("t", "merge", {A0: 5, A1: 2}, {A1: 4, B0: 0}) == {A0: 5, A1: 4, B0: 0}


def test_a_merge_moving_a_partition_backwards_is_refused() -> None:
    with pytest.raises(
        PositionsRegressedError, match="table t: position 1 for topic a partition 1"
    ):
        plan_positions("t", "merge", {A0: 5, A1: 2}, {A0: 6, A1: 1})


def test_a_replace_states_the_whole_position_set() -> None:
    assert plan_positions("t", "replace", {A0: 5, A1: 2}, {A0: 3, B0: 1}) == {A0: 3, B0: 1}
    with pytest.raises(ValueError, match="unknown write mode"):
        plan_positions("t", "upsert", None, {})


def test_commit_metadata_round_trips_and_ignores_foreign_metadata() -> None:
    text = encode_metadata(7, "merge", {A1: 4, A0: 2})
    assert decode_metadata(text) == (7, "merge", {A0: 2, A1: 4})
    for foreign in (None, "", "not json", '{"other": 1}', '{"replicator": {"seq": 1}}'):
        assert decode_metadata(foreign) is None


def test_the_delta_ledger_comes_from_commit_infos(tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    infos = [
        encode_metadata(1, "replace", {A0: 1}),
        "someone else's",
        encode_metadata(2, "merge", {A0: 4}),
    ]
    for version, meta in enumerate(infos):
        lines = [{"commitInfo": {"timestamp": 1000 + version, "userMetadata": meta}}, {"add": {}}]
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (log / "00000000000000000002.checkpoint.parquet").write_text("ignored")
    ledger = read_ledger("t", tmp_path / "t")
    assert [
        (e.seq, e.entry.version, e.entry.positions, e.entry.committed_at_ms) for e in ledger
    ] == [
        (1, 0, {A0: 1}, 1000),
        (2, 2, {A0: 4}, 1002),
    ]
    assert [e.seq for e in read_ledger("t", tmp_path / "t", latest_only=True)] == [2]
    assert read_ledger("u", tmp_path / "u") == []


def test_column_checks_name_the_offending_field() -> None:
    assert change_columns(SPEC, ["id", "v", "__op", "__pos", "__truncated"]) == ["id", "v"]
    assert row_columns(SPEC, ["id", "v", "__pos"]) == ["id", "v"]
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: change_columns(SPEC, ["id", "__op", "__pos"]), "__truncated"),
        (lambda: change_columns(SPEC, ["v", "__op", "__pos", "__truncated"]), "id"),
        (lambda: row_columns(SPEC, ["id", "__op"]), "__op"),
        (lambda: row_columns(TableSpec("t", ()), ["id"]), "primary_key"),
        (lambda: row_columns(TableSpec("t__tombstones", ("id",)), ["id"]), "name"),
    ]
    for check, field in cases:
        with pytest.raises(ChangeEventError) as raised:
            check()
        assert raised.value.field == field


def test_sink_urls() -> None:
    assert sink_path("duckdb:///data/r.duckdb") == ("duckdb", Path("/data/r.duckdb"))
    assert sink_path("delta:///data/lake") == ("delta", Path("/data/lake"))
    assert sink_url("delta", "/data/lake") == "delta:///data/lake"
    for bad in ("parquet:///x", "delta://host/x", "duckdb:relative.duckdb"):
        with pytest.raises(ValueError, match="sink URL"):
            sink_path(bad)
