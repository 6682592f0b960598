"""Errors of the local log: damaged files, fenced writers, lock timeouts, topic misconfiguration."""

from __future__ import annotations

from cdc.errors import UserError
from cdc.streams.protocol import TransactionLostError


class LocalLogError(RuntimeError):
    """Base class of the local log's errors."""


class CorruptLogError(UserError, LocalLogError):
    """Committed data on disk is damaged (bad CRC, truncated frame); nothing was returned from it.

    ``path``/``topic``/``partition``/``offset``/``position`` locate the damage when known.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        position: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.position = position
        where = [
            f"{name} {value}"
            for name, value in (
                ("topic", topic),
                ("partition", partition),
                ("offset", offset),
                ("file", path),
                ("byte", position),
            )
            if value is not None
        ]
        super().__init__(f"{reason} at {', '.join(where)}" if where else reason)


class FencedWriterError(LocalLogError, TransactionLostError):
    """A newer writer with the same transactional id exists; this one may no longer commit."""


class WriterLockTimeout(UserError, LocalLogError):
    """Another writer kept the log directory's transaction lock for longer than the timeout."""


class TopicConfigError(UserError, LocalLogError, ValueError):
    """A topic is unknown, misnamed, or requested with a configuration that contradicts it."""
