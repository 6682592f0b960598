"""Which librdkafka errors are a refused login (not retried) and which an outage (retried)."""

from __future__ import annotations

from cdc.errors import UnavailableError
from cdc.streams import kafka_client as kc
from cdc.streams.kafka_errors import KafkaRefusedError, LoginWatch, failed


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
