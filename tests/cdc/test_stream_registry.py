"""Streams are chosen by URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.errors import UsageError
from cdc.streams.local import LocalLog
from cdc.streams.registry import open_stream


def test_local_url_opens_the_local_log(tmp_path: Path) -> None:
    stream = open_stream(f"local://{tmp_path}/log")
    try:
        assert isinstance(stream, LocalLog)
        stream.ensure_topic("t", 2)
        assert stream.partition_count("t") == 2
    finally:
        stream.close()


def test_unknown_scheme_names_the_known_ones() -> None:
    with pytest.raises(
        UsageError,
        match=r"unknown event stream URL 'pulsar://x': expected kafka://host:port or local:///",
    ):
        open_stream("pulsar://x")
