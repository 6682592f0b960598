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
from cdc.runtime.tls import make_local_pki
from cdc.streams.kafka_stream import _METADATA_TIMEOUT_S, KafkaRefusedError
from cdc.streams.registry import open_stream, printable_url
from projections.change_ops import RowChange
from replay.cli.follow import follow_rounds
from replay.reading.bounds import Bound, BoundKind
from replay.reading.kafka_options import java_client_options
from replay.reading.kafka_source_errors import KafkaSourceRefusedError, kafka_source_error
from replay.reading.plan import ReplayPlan, plan_replay
from replay.reading.sources import read_records
from replay.sinks import duckdb_files
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
    with pytest.raises(UsageError, match=r"sasl\.kerberos\.keytab, ssl\.engine\.location"):
        java_client_options({"ssl.engine.location": "e.so", "sasl.kerberos.keytab": "k"})
    with pytest.raises(UsageError, match=r"sasl\.mechanism=GSSAPI"):
        java_client_options({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})


CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def test_a_client_certificate_becomes_an_inline_pem_keystore(tmp_path: Path) -> None:
    """The driver reads the files, so executors on other machines need none of them."""
    (tmp_path / "c.pem").write_text(CERT)
    (tmp_path / "c.key").write_text(KEY)
    files = {"ssl.certificate.location": str(tmp_path / "c.pem"),
             "ssl.key.location": str(tmp_path / "c.key"), "ssl.key.password": "kp"}  # fmt: skip
    keystore = {"kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.certificate.chain": CERT,
                "kafka.ssl.keystore.key": KEY}  # fmt: skip
    assert java_client_options(files) == keystore  # the key needs no password: not passed on
    encrypted = KEY.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")
    (tmp_path / "c.key").write_text(encrypted)
    assert java_client_options(files) == {
        **keystore,
        "kafka.ssl.keystore.key": encrypted,
        "kafka.ssl.key.password": "kp",
    }
    (tmp_path / "c.key").write_text(KEY)
    assert java_client_options({"ssl.certificate.pem": CERT, "ssl.key.pem": KEY}) == keystore
    pkcs12 = {"ssl.keystore.location": "/etc/c.p12", "ssl.keystore.password": "sp"}
    assert java_client_options(pkcs12) == {
        "kafka.ssl.keystore.type": "PKCS12", "kafka.ssl.keystore.location": "/etc/c.p12",
        "kafka.ssl.keystore.password": "sp",
    }  # fmt: skip
    assert java_client_options({"ssl.ca.pem": CERT, "ssl.ca.location": "probe"}) == {
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": CERT,
    }
    assert java_client_options({"ssl.ca.location": "probe"}) == {}


def test_a_client_certificate_the_java_client_cannot_read_is_named(tmp_path: Path) -> None:
    (tmp_path / "rsa.key").write_text(KEY.replace("PRIVATE KEY", "RSA PRIVATE KEY"))
    legacy = {"ssl.certificate.pem": CERT, "ssl.key.location": str(tmp_path / "rsa.key")}
    with pytest.raises(UsageError, match=r"RSA key in the legacy format.*openssl pkcs8 -topk8"):
        java_client_options(legacy)
    with pytest.raises(UsageError, match=r"gives ssl\.certificate\.\* without its pair"):
        java_client_options({"ssl.certificate.pem": CERT})
    missing = {"ssl.certificate.location": str(tmp_path / "none.pem"), "ssl.key.pem": KEY}
    with pytest.raises(UsageError, match=r"ssl\.certificate\.location .*none\.pem cannot be read"):
        java_client_options(missing)


LOGIN = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "alice", "sasl.password": "alice-secret"}  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaBroker]:
    """A broker with a SASL/PLAIN listener (alice's login) and a mutual-TLS one."""
    pki = make_local_pki(tmp_path_factory.mktemp("pki"))
    broker = LocalKafkaBroker(
        tmp_path_factory.mktemp("secured"), sasl_users={"alice": "alice-secret"}, tls=pki
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def sasl_url(secured: LocalKafkaBroker) -> str:
    """The URL of the SASL/PLAIN listener, with a login it takes."""
    return f"kafka://127.0.0.1:{secured.sasl_port}?{urlencode(LOGIN)}"


@pytest.mark.integration
def test_a_mutual_tls_cluster_is_read_by_the_driver_and_by_spark_alike(
    spark: Any, secured: LocalKafkaBroker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The client certificate reaches Spark's Kafka source as an inline PEM keystore, the CA as
    a PEM truststore; the broker takes no client without a certificate of its CA."""
    assert secured.tls is not None
    url = f"kafka://127.0.0.1:{secured.ssl_port}?{urlencode(secured.tls.client_settings())}"
    plan, _ = written_and_planned(url, "mtls", 30)
    by_driver = sorted(tuple(r) for r in read_records(spark, url, plan).collect())
    monkeypatch.setenv("REPLICATOR_DRIVER_READ_OFFSETS", "0")  # Spark's Kafka source
    by_spark = sorted(tuple(r) for r in read_records(spark, url, plan).collect())
    assert len(by_spark) == 30 and by_spark == by_driver

    anonymous = {**secured.tls.client_settings()}
    del anonymous["ssl.certificate.location"], anonymous["ssl.key.location"]
    strange_ca = {**secured.tls.client_settings(), "ssl.ca.location": str(other_ca(tmp_path))}
    for settings in (anonymous, strange_ca):  # the broker refuses us, we refuse the broker
        refused = open_stream(f"kafka://127.0.0.1:{secured.ssl_port}?{urlencode(settings)}")
        try:
            with pytest.raises(KafkaRefusedError, match=r"logging in to the brokers fail.*cert"):
                refused.partition_count("mtls")
        finally:
            refused.close()


def written_and_planned(url: str, topic: str, records: int) -> tuple[ReplayPlan, str]:
    """Write ``records`` records to a new 2-partition ``topic`` through the stream at ``url`` (in
    one transaction); the plan reading them all, and the stream's own url."""
    stream = open_stream(url)
    try:
        stream.ensure_topic(topic, 2)
        writer = stream.writer(f"{topic}-writer")
        writer.begin()
        for i in range(records):
            writer.send(topic, f"k{i}".encode(), f"v{i}".encode(), partition=i % 2)
        writer.commit()
        writer.close()
        plan = plan_replay(stream, [topic], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
        return plan, stream.url
    finally:
        stream.close()


def other_ca(directory: Path) -> Path:
    """The CA certificate of another throw-away authority than the broker's."""
    return make_local_pki(directory / "other-pki").ca


@pytest.mark.integration
def test_a_sasl_cluster_is_read_by_the_driver_and_by_spark_alike(
    spark: Any, sasl_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # reopens: the stream's url, which the engines hand to the readers: the login included
    plan, reopens = written_and_planned(sasl_url, "secured", 40)
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
    assert "logging in to the brokers failed" in str(refused.value)
    timed = open_stream(wrong)  # the offset at a time (--start-time) names it as well
    started = time.monotonic()
    try:
        with pytest.raises(KafkaRefusedError, match="Invalid username or password"):
            timed.offset_for_time("secured", 0, 0)
    finally:
        timed.close()
    assert time.monotonic() - started < _METADATA_TIMEOUT_S / 2

    args = ("owners", "--stream", wrong, "--id", "p", "--input", "secured")
    owners = replicator(*args, cwd=tmp_path)
    assert owners.returncode == 2
    assert owners.stderr.count("\n") == 1 and "logging in to the brokers failed" in owners.stderr
    assert "not-alices-secret" not in owners.stdout + owners.stderr

    right = open_stream(sasl_url)  # the same calls with the right login answer
    try:
        right.ensure_topic("secured", 2)
        assert right.partition_count("secured") == 2
    finally:
        right.close()
