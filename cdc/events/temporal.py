"""Conversions between Debezium's temporal encodings and Python ``datetime`` values.

Timestamps without a zone (``Timestamp``, ``MicroTimestamp``, ``NanoTimestamp``) are wall-clock
values Debezium encodes as if in UTC; they decode to naive ``datetime``. ``ZonedTimestamp``
decodes to an aware ``datetime``. Python keeps microseconds: nanosecond encodings are floored to
microseconds. A time of day outside ``[00:00, 24:00)`` (MySQL ``TIME`` is a duration and can be
negative or over 24 hours; PostgreSQL allows ``24:00:00``) decodes to a ``timedelta``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

EPOCH = datetime(1970, 1, 1)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MICROS_PER_DAY = 86_400_000_000
_ONE_MICRO = timedelta(microseconds=1)


def date_from_days(days: int) -> date:
    """Days since 1970-01-01 to a ``date``; raises ``ValueError`` out of Python's range."""
    return date.fromordinal(_EPOCH_ORDINAL + days)


def days_from_date(value: date) -> int:
    """A ``date`` to days since 1970-01-01."""
    return value.toordinal() - _EPOCH_ORDINAL


def datetime_from_micros(micros: int) -> datetime:
    """Microseconds since the epoch to a naive ``datetime`` (``OverflowError`` out of range)."""
    return EPOCH + timedelta(microseconds=micros)


def micros_from_datetime(value: datetime) -> int:
    """A naive ``datetime`` to microseconds since the epoch."""
    return (value - EPOCH) // _ONE_MICRO


def time_from_micros(micros: int) -> time | timedelta:
    """Microseconds since midnight to a ``time``, or a ``timedelta`` outside one day."""
    if not 0 <= micros < _MICROS_PER_DAY:
        return timedelta(microseconds=micros)
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return time(hour, minute, second, micro)


def micros_from_time(value: time) -> int:
    """A naive ``time`` to microseconds since midnight."""
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def zoned_datetime(text: str) -> datetime:
    """ISO-8601 text with a zone (``2019-07-09T01:28:10.123456Z``) to an aware ``datetime``."""
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no zone")
    return value


def zoned_text(value: datetime) -> str:
    """An aware ``datetime`` as Debezium's ``ZonedTimestamp`` text: UTC, microseconds, ``Z``."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("a zoned timestamp needs an aware datetime")
    text = value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"{text}Z"


def zoned_time(text: str) -> time:
    """ISO-8601 time with a zone (``08:00:00Z``) to an aware ``time``."""
    value = time.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone")
    return value
