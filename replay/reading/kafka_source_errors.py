"""Spark jobs that failed on their Kafka source, told apart from other failures.

Spark's Kafka source runs in the tasks, so its errors reach the driver as Java exceptions (their
text naming the Kafka error), not as the stream's errors; ``kafka_source_error`` turns them into
the product's: unavailable (``--follow`` waits and retries) or refused (a one-line stop).
"""

from __future__ import annotations

import re

from cdc.errors import LoginRefusedError, UnavailableError, UserError
from replay.spark import Py4JJavaError, PySparkException


class KafkaSourceUnavailableError(UnavailableError):
    """A Spark job failed because its Kafka source could not reach the brokers in time."""


class KafkaSourceRefusedError(LoginRefusedError):
    """A Spark job failed because the brokers refused its Kafka source (login, permissions)."""


_KAFKA_UNREACHABLE = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(?:TimeoutException|DisconnectException"
    r"|NetworkException|LeaderNotAvailableException|NotLeaderOrFollowerException)[^\n]*"
    r"|Cannot fetch record for offset \d+ in \d+ milliseconds[^\n]*"
)
_KAFKA_REFUSED = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(?:\w*AuthenticationException"
    r"|\w*AuthorizationException)[^\n]*"
)


def kafka_source_error(exc: BaseException) -> UserError | None:
    """If ``exc`` is a Spark failure caused by Kafka, that as one of our errors naming the Kafka
    error: :class:`KafkaSourceUnavailableError` (an :class:`~cdc.errors.UnavailableError`) for
    Kafka not answering (a broker down or restarting, a partition without a leader, a fetch that
    timed out), :class:`KafkaSourceRefusedError` for a login or permission refused; else None.
    Spark's Kafka source runs in the tasks, so these arrive as Java exceptions, not as the
    stream's errors."""
    if isinstance(exc, Py4JJavaError):
        text = str(exc)
    elif isinstance(exc, PySparkException):
        text = f"{getattr(exc, '_desc', '')}\n{getattr(exc, '_stackTrace', '')}"
    else:
        return None
    refused = _KAFKA_REFUSED.search(text)
    if refused is not None:
        return KafkaSourceRefusedError(
            f"the brokers refused Spark's Kafka source: {_reason(refused)}"
        )
    found = _KAFKA_UNREACHABLE.search(text)
    if found is None:
        return None
    return KafkaSourceUnavailableError(
        f"Spark's Kafka source could not read from the brokers: {_reason(found)}"
    )


def _reason(found: re.Match[str]) -> str:
    return found.group(0).strip().removeprefix("org.apache.kafka.common.errors.")[:300]


__all__ = ["KafkaSourceRefusedError", "KafkaSourceUnavailableError", "kafka_source_error"]
