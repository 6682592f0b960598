"""Opens an event stream from its URL: ``kafka://host:port[,…][?client.option=…]`` or
``local:///abs/dir`` (``local://rel/dir``) for the embedded local log."""

from __future__ import annotations

from urllib.parse import urlsplit

from cdc.errors import UsageError
from cdc.streams.protocol import EventStream

SCHEMES = ("kafka", "local")


def open_stream(url: str) -> EventStream:
    """The :class:`EventStream` named by ``url``."""
    scheme = urlsplit(url).scheme
    if scheme == "kafka":
        from cdc.streams.kafka_stream import KafkaEventStream

        return KafkaEventStream.from_url(url)
    if scheme == "local":
        from cdc.streams.local import LocalLog

        return LocalLog.from_url(url)
    raise UsageError(
        f"unknown event stream URL {url!r}: expected kafka://host:port or local:///directory"
    )


def printable_url(url: str) -> str:
    """``url`` without its query: a Kafka URL's client settings may hold credentials."""
    parts = urlsplit(url)
    return parts._replace(query="").geturl() + ("?..." if parts.query else "")


def stream_url_for_bootstrap(bootstrap: str) -> str:
    """The stream URL of a Kafka cluster given by its bootstrap servers."""
    return f"kafka://{bootstrap}"
