"""Session-wide real components (one Kafka broker, one SparkSession) and shared factories."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime.broker import LocalKafkaBroker
from cdc.runtime.postgres import LocalPostgres

REPO_ROOT = Path(__file__).resolve().parents[1]
DEBEZIUM_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "debezium"
"""Change events published by real Debezium deployments, copied byte for byte with their
provenance (``SOURCES.md`` there): the tests need nothing outside the checkout."""
# The tests' data is tiny: every shuffle task costs time, 8 partitions instead of 2 make a small
# replay about 50% slower. Read by every in-process SparkSession (the demo's and CLI's too).
os.environ.setdefault("REPLICATOR_SHUFFLE_PARTITIONS", "2")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of the session's broker: ``$KAFKA_BOOTSTRAP_SERVERS`` or a local one."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    broker = LocalKafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """The session's PostgreSQL cluster (wal_level=logical), in a temporary directory."""
    with LocalPostgres() as pg:
        yield pg


@pytest.fixture(scope="session")
def spark() -> Any:
    """The session's SparkSession (local mode unless ``$REPLICATOR_SPARK_MASTER`` is set)."""
    from replay.spark import spark_session

    session = spark_session(app_name="replicator-tests")
    yield session
    session.stop()


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """Factory of names unique to the test run (topics, groups, transactional ids)."""

    def make(prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    return make
