"""How Kafka client failures become the project's errors, and the logins the brokers refused.

librdkafka retries a refused login (SASL authentication, a TLS handshake it cannot verify) as if
the broker were down, and tells only its ``error_cb``: a blocking call then waits out its timeout
and fails with a transport error. :class:`LoginWatch` is that callback for every client of a
stream, so a refused login is named as such (:class:`KafkaRefusedError`, a
:class:`~cdc.errors.LoginRefusedError`) instead of "is the broker running?".
"""

from __future__ import annotations

from cdc.errors import LoginRefusedError, UnavailableError, UserError
from cdc.streams import kafka_client as kc
from cdc.streams.protocol import TransactionLostError


class KafkaStreamError(UserError, RuntimeError):
    """A Kafka operation failed; the message names the topic and partition involved."""


class KafkaUnavailableError(KafkaStreamError, UnavailableError):
    """The cluster did not answer in time (down, restarting or unreachable)."""


class KafkaRefusedError(KafkaStreamError, LoginRefusedError):
    """The brokers refused the client's login (wrong credentials, mechanism or certificate)."""


class KafkaTransactionError(TransactionLostError):
    """A transaction could not be committed; nothing of it is visible to read-committed readers."""


class KafkaTransactionUnavailableError(KafkaTransactionError, UnavailableError):
    """A transaction could not be committed because the cluster did not answer in time, before
    its commit was asked for (a one-line error for the command line, like any outage)."""


class KafkaCommitUnknownError(KafkaUnavailableError):
    """A transaction's commit did not complete in time, or committed but did not become visible:
    it may have taken effect, so it is not a :class:`~cdc.streams.protocol.TransactionLostError`
    (whose records a caller would process again). The writer's next start settles it: its
    ``init_transactions`` completes or aborts what the coordinator holds."""


_UNAVAILABLE_CODES = (
    kc.KafkaError._ALL_BROKERS_DOWN,
    kc.KafkaError._TRANSPORT,
    kc.KafkaError._TIMED_OUT,
    kc.KafkaError._RESOLVE,
    # A request's broker handle dropped as the broker left the cluster's metadata (seen when
    # the only broker stops during a metadata request): the cluster is away, not refusing.
    kc.KafkaError._DESTROY_BROKER,
)
_REFUSED_CODES = (kc.KafkaError._AUTHENTICATION, kc.KafkaError.SASL_AUTHENTICATION_FAILED)


def unavailable(err: kc.KafkaError) -> bool:
    """Whether ``err`` says the cluster did not answer (a retriable error, or one of
    ``_UNAVAILABLE_CODES``) rather than refused."""
    return bool(err.retriable()) or err.code() in _UNAVAILABLE_CODES


class LoginWatch:
    """An ``error_cb`` keeping the newest refused login librdkafka reported (the callbacks run
    when a client is polled: ``KafkaEventStream`` polls its own around each metadata request)."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, err: kc.KafkaError) -> None:
        text = str(err.str())
        if "Failed to acquire" in text:  # an OAUTHBEARER token not fetched: its provider's outage
            return
        # A TLS handshake fails over a certificate either way ("certificate verify failed",
        # or the broker's alert "bad certificate", reported as a transport failure); one cut
        # short by a restarting broker names none, and stays an outage.
        if err.code() in _REFUSED_CODES or (
            "SSL" in text and ("certificate" in text or "unknown ca" in text)
        ):
            self.refused = text


def refused(what: str, detail: str) -> KafkaRefusedError:
    """The error of ``what`` failing because a login failed with librdkafka's ``detail``."""
    return KafkaRefusedError(
        f"{what}: logging in to the brokers failed (check the URL's login settings): {detail}"
    )


def failed(
    what: str, exc: kc.KafkaException, login: LoginWatch | None = None, *, away: bool = False
) -> KafkaStreamError:
    """``exc`` of ``what`` as our error: :class:`KafkaRefusedError` when ``login`` saw a refusal,
    :class:`KafkaUnavailableError` when ``unavailable`` (or the caller knows the cluster is
    ``away``)."""
    err = kc.kafka_error(exc)
    if login is not None and login.refused is not None:
        return refused(what, login.refused)
    if err is None:
        return KafkaStreamError(f"{what}: {exc}")
    if away or unavailable(err):
        return KafkaUnavailableError(f"{what}: {err.str()} (is the broker running and reachable?)")
    return KafkaStreamError(f"{what}: {err.str()}")
