"""Database and Debezium capture factories for the runtime tests (the session's PostgreSQL
cluster, ``postgres``, is in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime.debezium_capture import CaptureOptions, DebeziumCapture
from cdc.runtime.postgres import LocalPostgres


@pytest.fixture
def pg_database(postgres: LocalPostgres, unique_name: Callable[[str], str]) -> str:
    """DSN of a new database of the session's cluster, owned by the replication user."""
    return postgres.create_database(unique_name("db").replace("-", "_"))


@pytest.fixture
def start_capture(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., DebeziumCapture]]:
    """Factory: ``start_capture(dsn, tables, **CaptureOptions fields)`` -> a started capture.

    The topic prefix is unique unless given; the work directory is ``tmp_path/<prefix>`` unless
    ``work_dir=`` is passed (pass the same one to resume). Captures stop when the test ends.
    """
    started: list[DebeziumCapture] = []

    def start(
        dsn: str, tables: tuple[str, ...], *, work_dir: Path | None = None, **fields: Any
    ) -> DebeziumCapture:
        fields.setdefault("topic_prefix", unique_name("dbz"))
        options = CaptureOptions(pg_dsn=dsn, bootstrap=kafka_bootstrap, tables=tables, **fields)
        capture = DebeziumCapture(options, work_dir or tmp_path / options.topic_prefix)
        started.append(capture)
        capture.start()
        return capture

    yield start
    for capture in started:
        capture.stop()
