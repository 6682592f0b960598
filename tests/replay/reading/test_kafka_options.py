"""A kafka:// URL's client settings reach Spark's Kafka source: translated where the Java client
names them differently, checked against a real SASL (PLAIN) listener."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from cdc.errors import UnavailableError, UsageError
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.kafka_stream import _METADATA_TIMEOUT_S, KafkaRefusedError
from cdc.streams.registry import open_stream, printable_url
from projections.change_ops import RowChange
from replay.cli.follow import follow_rounds
from replay.reading.bounds import Bound, BoundKind
from replay.reading.kafka_options import java_client_options
from replay.reading.plan import plan_replay
from replay.reading.sources import read_records
from replay.sinks import duckdb_files
from replay.spark import KafkaSourceRefusedError, kafka_source_error
from tests.replay.cli.test_live_duckdb_readers import sale_row
from tests.replay.cli.test_user_errors import replicator
from tests.replay.projection.workload import SALES, SalesTopic

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_same_names_pass_and_differing_ones_are_translated() -> None:
    options = java_client_options({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "ann", "sasl.password": 'p"w\\d', "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none", "client.id": "replays",
        "group.id": "not-for-spark", "enable.partition.eof": "true",
    })  # fmt: skip
    assert options == {
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule"
        ' required username="ann" password="p\\"w\\\\d";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ca.pem",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.client.id": "replays",
    }
    assert java_client_options({}) == {}
    plain = java_client_options({"sasl.username": "u", "sasl.password": "p"})
    assert plain == {"kafka.sasl.jaas.config": f'{PLAIN} required username="u" password="p";'}


def test_settings_without_a_translation_are_named() -> None:
    with pytest.raises(UsageError, match=r"ssl\.certificate\.location, ssl\.key\.location"):
        java_client_options({"ssl.key.location": "k.pem", "ssl.certificate.location": "c.pem"})
    with pytest.raises(UsageError, match=r"sasl\.mechanism=GSSAPI"):
        java_client_options({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})


LOGIN = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "alice", "sasl.password": "alice-secret"}  # fmt: skip


@pytest.fixture(scope="module")
def sasl_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a broker's SASL/PLAIN listener, with a login it takes."""
    broker = LocalKafkaBroker(tmp_path_factory.mktemp("sasl"), sasl_users={"alice": "alice-secret"})
    broker.start()
    try:
        yield f"kafka://127.0.0.1:{broker.sasl_port}?{urlencode(LOGIN)}"
    finally:
        broker.stop()


@pytest.mark.integration
def test_a_sasl_cluster_is_read_by_the_driver_and_by_spark_alike(
    spark: Any, sasl_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = open_stream(sasl_url)
    try:
        stream.ensure_topic("secured", 2)
        writer = stream.writer("secured-writer")
        writer.begin()
        for i in range(40):
            writer.send("secured", f"k{i}".encode(), f"v{i}".encode(), partition=i % 2)
        writer.commit()
        writer.close()
        plan = plan_replay(stream, ["secured"], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
        reopens = stream.url  # what the engines hand to the readers: the login included
    finally:
        stream.close()
    assert "alice-secret" in reopens
    assert printable_url(reopens) == f"{sasl_url.split('?')[0]}?..."
    by_driver = sorted(tuple(r) for r in read_records(spark, reopens, plan).collect())
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", "0")  # Spark's Kafka source
    by_spark = sorted(tuple(r) for r in read_records(spark, reopens, plan).collect())
    assert len(by_spark) == 40 and by_spark == by_driver
    wrong = sasl_url.replace("alice-secret", "wrong")
    with pytest.raises(Exception, match="Authentication failed") as refused:
        read_records(spark, wrong, plan).collect()
    named = kafka_source_error(refused.value)  # what a run stops with: one line, not retried
    assert isinstance(named, KafkaSourceRefusedError) and not isinstance(named, UnavailableError)
    assert str(named).startswith("the brokers refused Spark's Kafka source: SaslAuthentication")
    assert "\n" not in str(named)

    def login_refused() -> bool:
        raise refused.value

    waits: list[float] = []
    with pytest.raises(KafkaSourceRefusedError):  # --follow does not retry a refused login
        follow_rounds(login_refused, follow=True, poll_s=1.0, sleep=waits.append)
    assert waits == []


@pytest.mark.integration
def test_replicator_replay_rebuilds_and_catches_up_from_a_sasl_cluster(
    sasl_url: str, tmp_path: Path
) -> None:
    """The command line end to end: a rebuild (compaction in the tasks, through the project's
    client) and a catch-up read by Spark's Kafka source, both logging in."""
    stream = open_stream(sasl_url)
    try:
        sales = SalesTopic(stream, partitions=2)
        sales.write(RowChange("c", None, sale_row(i, 1)) for i in range(30))
        sink = f"duckdb://{tmp_path}/secured.duckdb"
        args = ("replay", "--stream", sasl_url, "--sink", sink, "--topics", sales.topic)
        first = replicator(*args, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert "alice-secret" not in first.stdout + first.stderr
        sales.write(RowChange("u", None, sale_row(i, 2)) for i in range(0, 30, 3))
        env = {"REPLICATOR_DRIVER_READ_OFFSETS": "0"}
        second = replicator(*args, cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stderr
    finally:
        stream.close()
    _, rows = duckdb_files.query(f"{tmp_path}/secured.duckdb",
                                 f"SELECT id, seats FROM {SALES.name} ORDER BY id")  # fmt: skip
    assert rows == [(i, 2 if i % 3 == 0 else 1) for i in range(30)]


@pytest.mark.integration
def test_a_login_the_brokers_refuse_is_named_at_once_by_the_drivers_client(
    sasl_url: str, tmp_path: Path
) -> None:
    """librdkafka retries a refused login as if the broker were down: without the stream's
    ``error_cb`` a command waited out the metadata timeout and then blamed the network."""
    wrong = sasl_url.replace("alice-secret", "not-alices-secret")
    stream = open_stream(wrong)
    started = time.monotonic()
    try:
        with pytest.raises(KafkaRefusedError, match="Invalid username or password") as refused:
            stream.partition_count("secured")
    finally:
        stream.close()
    assert time.monotonic() - started < _METADATA_TIMEOUT_S / 2  # did not wait it out
    assert not isinstance(refused.value, UnavailableError)  # --follow does not retry it
    assert "the brokers refused the login" in str(refused.value)

    args = ("owners", "--stream", wrong, "--id", "p", "--input", "secured")
    owners = replicator(*args, cwd=tmp_path)
    assert owners.returncode == 2
    assert owners.stderr.count("\n") == 1 and "refused the login" in owners.stderr
    assert "not-alices-secret" not in owners.stdout + owners.stderr

    right = open_stream(sasl_url)  # the same calls with the right login answer
    try:
        right.ensure_topic("secured", 2)
        assert right.partition_count("secured") == 2
    finally:
        right.close()
