"""Session-wide real components (one Kafka broker, one SparkSession) and shared factories."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.compiled import stale_modules
from cdc.runtime.broker import LocalKafkaBroker
from cdc.runtime.postgres import LocalPostgres

REPO_ROOT = Path(__file__).resolve().parents[1]
DEBEZIUM_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "debezium"
"""Change events published by real Debezium deployments, copied byte for byte with their
provenance (``SOURCES.md`` there): the tests need nothing outside the checkout."""
# The tests' data is tiny: every shuffle task costs time, 8 partitions instead of 2 make a small
# replay about 50% slower. Read by every in-process SparkSession (the demo's and CLI's too).
os.environ.setdefault("REPLICATOR_SHUFFLE_PARTITIONS", "2")

_SHARED_BROKER: tuple[LocalKafkaBroker, Path] | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the controller starts the one broker every worker uses (through
    ``$KAFKA_BOOTSTRAP_SERVERS``, which the workers inherit). A hot-path module edited after
    it was compiled stops the run: the tests would exercise the old compiled code."""
    global _SHARED_BROKER
    stale = stale_modules()
    if stale:
        pytest.exit(f"edited since compiled with mypyc: {stale}; run `make compiled` "
                    "(or `make pure` to run plain Python)", returncode=4)  # fmt: skip
    controller = not hasattr(config, "workerinput")
    parallel = getattr(config.option, "dist", "no") != "no"
    if controller and parallel and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        data_dir = Path(tempfile.mkdtemp(prefix="replicator-test-broker-"))
        broker = LocalKafkaBroker(data_dir)
        broker.start()
        _SHARED_BROKER = (broker, data_dir)
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap_servers


def pytest_unconfigure(config: pytest.Config) -> None:
    global _SHARED_BROKER
    if _SHARED_BROKER is not None:
        broker, data_dir = _SHARED_BROKER
        _SHARED_BROKER = None
        os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


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
    """The session's SparkSession (local mode unless ``$REPLICATOR_SPARK_MASTER`` is set): one
    per test process, so one per pytest-xdist worker."""
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


def fake_java(tmp_path: Path, name: str = "java") -> str:
    """A file standing for a ``java`` binary (the archive's name follows its path and stat)."""
    binary = tmp_path / "jdk" / name
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    return str(binary)
