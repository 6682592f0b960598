"""A kafka:// URL's client settings reach Spark's Kafka source: translated where the Java client
names them differently, checked against a real SASL (PLAIN) listener."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from cdc.errors import UsageError
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.registry import open_stream
from replay.reading.bounds import Bound, BoundKind
from replay.reading.kafka_options import java_client_options
from replay.reading.plan import plan_replay
from replay.reading.sources import read_records

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


@pytest.mark.integration
def test_a_sasl_cluster_is_read_by_the_driver_and_by_spark_alike(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = LocalKafkaBroker(tmp_path / "broker", sasl_users={"alice": "alice-secret"})
    broker.start()
    try:
        login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                 "sasl.username": "alice", "sasl.password": "alice-secret"}  # fmt: skip
        url = f"kafka://127.0.0.1:{broker.sasl_port}?{urlencode(login)}"
        stream = open_stream(url)
        try:
            stream.ensure_topic("secured", 2)
            writer = stream.writer("secured-writer")
            writer.begin()
            for i in range(40):
                writer.send("secured", f"k{i}".encode(), f"v{i}".encode(), partition=i % 2)
            writer.commit()
            writer.close()
            plan = plan_replay(stream, ["secured"], Bound(BoundKind.EARLIEST),
                               Bound(BoundKind.LATEST))  # fmt: skip
        finally:
            stream.close()
        by_driver = sorted(tuple(r) for r in read_records(spark, url, plan).collect())
        monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", "0")  # Spark's Kafka source
        by_spark = sorted(tuple(r) for r in read_records(spark, url, plan).collect())
        assert len(by_spark) == 40 and by_spark == by_driver
        wrong = url.replace("alice-secret", "wrong")
        with pytest.raises(Exception, match="Authentication failed"):
            read_records(spark, wrong, plan).collect()
    finally:
        broker.stop()
