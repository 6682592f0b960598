"""Parsing replay bounds from their text forms."""

from __future__ import annotations

import pytest

from cdc.streams.protocol import TopicPartition
from replay.reading.bounds import BoundKind, parse_bound, parse_lsn


def test_named_bounds_belong_to_their_side() -> None:
    assert parse_bound("earliest", stop=False).kind is BoundKind.EARLIEST
    assert parse_bound("ledger", stop=False).kind is BoundKind.LEDGER
    assert parse_bound("latest", stop=True).kind is BoundKind.LATEST
    with pytest.raises(ValueError, match="'latest' is not a start bound"):
        parse_bound("latest", stop=False)
    with pytest.raises(ValueError, match="'earliest' is not a stop bound"):
        parse_bound("earliest", stop=True)


def test_offsets_timestamps_and_source_positions() -> None:
    offsets = parse_bound("orders:0:15,orders:1:7", stop=True)
    assert offsets.offsets == {TopicPartition("orders", 0): 15, TopicPartition("orders", 1): 7}
    assert parse_bound("2024-05-01T12:00:00Z", stop=True).timestamp_ms == 1714564800000
    assert parse_bound("ts:1714564800000", stop=False).timestamp_ms == 1714564800000
    assert parse_bound("lsn:16/B374D848", stop=True).lsn == (0x16 << 32) | 0xB374D848
    assert parse_lsn("34132560") == 34132560
    assert parse_bound("binlog:mysql-bin.000003:1041", stop=True).binlog == (
        "mysql-bin.000003",
        1041,
    )
    assert parse_bound("txn:proc-1:42", stop=True).txn == "proc-1:42"


def test_bad_bounds_say_what_is_expected() -> None:
    with pytest.raises(ValueError, match="needs a time zone"):
        parse_bound("2024-05-01T12:00:00", stop=True)
    with pytest.raises(ValueError, match="cannot read bound 'yesterday'"):
        parse_bound("yesterday", stop=True)
    with pytest.raises(ValueError, match="stop bound only"):
        parse_bound("lsn:0/1", stop=False)
