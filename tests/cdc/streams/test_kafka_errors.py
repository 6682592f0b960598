"""Which librdkafka errors are a refused login (not retried) and which an outage (retried)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from cdc.errors import UnavailableError
from cdc.streams import kafka_client as kc
from cdc.streams import kafka_stream
from cdc.streams.kafka_errors import KafkaRefusedError, LoginWatch, failed
from cdc.streams.kafka_stream import KafkaEventStream


def _seen(code: int, text: str) -> str | None:
    watch = LoginWatch()
    watch(kc.KafkaError(code, text))
    return watch.refused


def test_logins_and_certificates_are_refusals_and_cut_handshakes_are_outages() -> None:
    sasl = "sasl_ssl://b:9093/1: SASL authentication error: Authentication failed"
    assert _seen(kc.KafkaError._AUTHENTICATION, sasl) == sasl
    verify = "ssl://b:9093/1: SSL handshake failed: ... certificate verify failed"
    assert _seen(kc.KafkaError._SSL, verify) == verify
    alert = "ssl://b:9093/1: Receive failed: SSL routines::ssl/tls alert bad certificate"
    assert _seen(kc.KafkaError._TRANSPORT, alert) == alert
    assert _seen(kc.KafkaError._SSL, "ssl://b:9093/1: SSL handshake failed: Disconnected") is None
    assert _seen(kc.KafkaError._TRANSPORT, "b:9092/1: Connect failed: Connection refused") is None
    token = "Failed to acquire SASL OAUTHBEARER token: the provider did not answer"
    assert _seen(kc.KafkaError._AUTHENTICATION, token) is None  # its provider's outage


def test_a_seen_refusal_names_the_failure_whatever_the_call_reported() -> None:
    timeout = kc.KafkaException(kc.KafkaError(kc.KafkaError._TRANSPORT, "transport failure"))
    assert isinstance(failed("listing topics", timeout), UnavailableError)
    watch = LoginWatch()
    watch(kc.KafkaError(kc.KafkaError._AUTHENTICATION, "Invalid username or password"))
    named = failed("listing topics", timeout, watch)
    assert isinstance(named, KafkaRefusedError) and not isinstance(named, UnavailableError)
    assert str(named).startswith("listing topics: logging in to the brokers failed")
    assert str(named).endswith("Invalid username or password")


def test_a_broker_gone_mid_request_is_an_outage() -> None:
    """A follower asking for a topic's metadata as the broker stopped got "Broker handle
    destroyed without termination" and exited instead of retrying the round."""
    gone = kc.KafkaException(
        kc.KafkaError(kc.KafkaError._DESTROY_BROKER, "Broker handle destroyed without termination")
    )
    assert isinstance(failed("describing topic t", gone), UnavailableError)


def test_every_metadata_question_to_an_unreachable_cluster_is_an_outage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A follower asking whether its topic is compacted as the broker stopped waited out the
    answer's future and exited on the bare ``TimeoutError`` instead of retrying the round."""
    monkeypatch.setattr(kafka_stream, "_METADATA_TIMEOUT_S", 3.0)
    with socket.socket() as held:  # a port nothing listens on: bound, never listening
        held.bind(("127.0.0.1", 0))
        stream = KafkaEventStream(f"127.0.0.1:{held.getsockname()[1]}")
        questions: dict[str, Callable[[], object]] = {
            "is_compacted": lambda: stream.is_compacted("t"),
            "partition_count": lambda: stream.partition_count("t"),
            "topics": stream.topics,
            "bounds": lambda: stream.bounds("t", 0),
        }
        for name, ask in questions.items():
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="is the broker running"):
                ask()
            assert time.monotonic() - started < 30, name
