"""The Java client settings of a ``kafka://`` URL, for Spark's Kafka source.

A stream URL carries client settings as its query: ``kafka://host:9093?security.protocol=
SASL_SSL&sasl.mechanism=PLAIN&sasl.username=u&sasl.password=p&ssl.ca.location=/etc/ca.pem``.
They are librdkafka's (the project's own client, used by the driver); Spark's Kafka source, which
reads large replays on the executors, runs the Java client. Most names are the same in both
(``security.protocol``, ``sasl.mechanism``, ``client.id``, timeouts) and pass as they are; these
are translated:

- ``sasl.username`` + ``sasl.password`` -> ``sasl.jaas.config`` (the PLAIN or SCRAM login module,
  after ``sasl.mechanism``; librdkafka's alias ``sasl.mechanisms`` is read too);
- ``ssl.ca.location`` (a PEM file) -> ``ssl.truststore.type=PEM`` + ``ssl.truststore.location``;
- ``ssl.endpoint.identification.algorithm=none`` -> empty (the Java client's "off").

Settings that change how a connection is made and have no translation here (client
certificates as files, Kerberos, OAUTHBEARER) stop the read naming them, rather than let the
executors connect differently from the driver. Settings Spark's source owns (group, offsets,
deserializers, isolation) are left to it.
"""

from __future__ import annotations

from collections.abc import Mapping

from cdc.errors import UsageError

_SPARK_OWNS = frozenset({
    "bootstrap.servers", "group.id", "auto.offset.reset", "enable.auto.commit",
    "enable.auto.offset.store", "enable.partition.eof", "isolation.level", "key.deserializer",
    "value.deserializer", "interceptor.classes",
})  # fmt: skip
_UNTRANSLATED = ("ssl.certificate.", "ssl.key.", "ssl.keystore.", "sasl.kerberos.",
                 "sasl.oauthbearer.")  # fmt: skip
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_client_options(settings: Mapping[str, str]) -> dict[str, str]:
    """Spark Kafka source options (``kafka.<name>``) for the librdkafka ``settings`` of a URL."""
    rest = dict(settings)
    if "sasl.mechanisms" in rest:
        rest.setdefault("sasl.mechanism", rest.pop("sasl.mechanisms"))
    untranslated = sorted(n for n in rest if n.startswith(_UNTRANSLATED))
    if untranslated:
        raise UsageError(
            f"the Kafka URL's {', '.join(untranslated)} cannot be given to Spark's Kafka source "
            "(its Java client names them differently); use a server-verified TLS or SASL "
            "login instead, or keep replays small enough for the driver's client"
            " ($REPLICATOR_DRIVER_READ_OFFSETS)"
        )
    out: dict[str, str] = {}
    username, password = rest.pop("sasl.username", None), rest.pop("sasl.password", None)
    if username is not None or password is not None:
        mechanism = rest.get("sasl.mechanism", "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise UsageError(f"the Kafka URL's sasl.mechanism={mechanism} has no login module here")
        out["sasl.jaas.config"] = (
            f'{module} required username="{_quoted(username)}" password="{_quoted(password)}";'
        )
    ca = rest.pop("ssl.ca.location", None)
    if ca is not None:
        out |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
    if rest.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        rest["ssl.endpoint.identification.algorithm"] = ""
    out |= {name: value for name, value in rest.items() if name not in _SPARK_OWNS}
    return {f"kafka.{name}": value for name, value in out.items()}


def _quoted(text: str | None) -> str:
    """``text`` inside a JAAS double-quoted string."""
    return (text or "").replace("\\", "\\\\").replace('"', '\\"')
