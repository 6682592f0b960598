"""Errors caused by what the user gave (input, data, environment) rather than by a bug.

Every such error derives from :class:`UserError`: the command line prints its message on one line
and exits with status 2, without a traceback (``replicator --debug`` shows it). Any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Base of the errors a user can fix; the message names what was wrong and where."""


class UsageError(UserError, ValueError):
    """A command-line value, URL, bound, name or file is wrong; the message says the fix."""


class ChangeEventError(UserError, ValueError):
    """A change event could not be decoded or is not a valid event.

    ``field`` is a dotted path inside the record (``payload.after.price``), and the origin
    (``topic``/``partition``/``offset``) is filled in when the record came from a stream.
    """

    def __init__(
        self,
        reason: str,
        *,
        field: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.field = field
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.topic is not None:
            where.append(f"topic {self.topic}")
        if self.partition is not None:
            where.append(f"partition {self.partition}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        at = f" at {', '.join(where)}" if where else ""
        fld = f" (field {self.field})" if self.field else ""
        return f"{self.reason}{fld}{at}"

    def at(self, topic: str, partition: int, offset: int) -> ChangeEventError:
        """Return this error with the stream origin filled in."""
        return ChangeEventError(
            self.reason, field=self.field, topic=topic, partition=partition, offset=offset
        )


class SetupError(UserError, RuntimeError):
    """A local component (Java, Maven, the broker, Spark) cannot start; the message says the fix."""


def one_line(exc: BaseException) -> str:
    """The error's message on one line (a multi-line message is joined with '; ')."""
    text = str(exc).strip() or type(exc).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


class LoginRefusedError(UserError):
    """The brokers refused the client's login (credentials, mechanism, certificate). Retrying
    helps only if the credentials' own service was down: ``--follow`` retries it once a round
    has succeeded, and stops at once on a login that never worked."""


class UnavailableError(UserError):
    """The stream or a sink could not be reached in time, or stayed busy: the same step may
    succeed later (``--follow`` retries its round; a one-off command stops)."""
