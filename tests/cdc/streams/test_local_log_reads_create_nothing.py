"""Opening or reading a local log creates nothing: a mistyped ``local://`` path in a read-only
command leaves no directory behind. The first write creates the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.streams.local import LocalLog
from cdc.streams.local.errors import TopicConfigError
from cdc.streams.registry import open_stream


def test_reading_a_missing_log_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "log"
    stream = open_stream(f"local://{missing}")
    try:
        assert stream.topics() == []
        assert stream.committed_positions("group", "topic") == {}
        with pytest.raises(TopicConfigError, match="unknown topic 'orders'"):
            stream.bounds("orders", 0)
    finally:
        stream.close()
    assert not (tmp_path / "typo").exists()


def test_the_first_write_creates_the_log_and_other_handles_see_it(tmp_path: Path) -> None:
    root = tmp_path / "log"
    reader = LocalLog(str(root))
    assert reader.topics() == []
    writer_side = LocalLog(str(root))
    writer_side.ensure_topic("orders", 2, compacted=True)
    writer = writer_side.writer("w")
    writer.begin()
    writer.send("orders", b"k", b"v", partition=1)
    writer.commit()
    writer.close()
    assert (root / "journal.log").is_file()
    assert reader.topics() == ["orders"]
    assert reader.bounds("orders", 1).end == 1
    reader.close()
    writer_side.close()
