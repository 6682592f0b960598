"""The Java client settings of a ``kafka://`` URL, for Spark's Kafka source.

A stream URL carries client settings as its query: ``kafka://host:9093?security.protocol=
SASL_SSL&sasl.mechanism=PLAIN&sasl.username=u&sasl.password=p&ssl.ca.location=/etc/ca.pem``.
They are librdkafka's (the project's own client, used by the driver); Spark's Kafka source, which
reads large replays on the executors, runs the Java client. Most names are the same in both
(``security.protocol``, ``sasl.mechanism``, ``client.id``, timeouts) and pass as they are; these
are translated:

- ``sasl.username`` + ``sasl.password`` -> ``sasl.jaas.config`` (the PLAIN or SCRAM login module,
  after ``sasl.mechanism``; librdkafka's alias ``sasl.mechanisms`` is read too);
- ``ssl.ca.location`` (a PEM file) -> ``ssl.truststore.type=PEM`` + ``ssl.truststore.location``
  (``ssl.ca.pem`` -> ``ssl.truststore.certificates``; ``probe``, the system's CAs, -> the JVM's);
- a client certificate (mutual TLS): ``ssl.certificate.location`` + ``ssl.key.location`` (PEM
  files, read here on the driver) or ``ssl.certificate.pem`` + ``ssl.key.pem`` -> a PEM keystore
  given inline (``ssl.keystore.certificate.chain``, ``ssl.keystore.key``: the executors need no
  files); ``ssl.keystore.location`` (PKCS#12) -> the same with ``ssl.keystore.type=PKCS12``;
  ``ssl.key.password`` (for an encrypted key only: librdkafka ignores it otherwise, the Java
  client would fail) and ``ssl.keystore.password`` keep their names. The Java client reads
  PKCS#8 keys only: a PKCS#1 or SEC1 key (``BEGIN RSA/EC PRIVATE KEY``) stops the read with the
  ``openssl pkcs8`` command that converts it;
- ``ssl.endpoint.identification.algorithm=none`` -> empty (the Java client's "off").

Settings that change how a connection is made and have no translation here (Kerberos,
OAUTHBEARER, an OpenSSL engine or provider) stop the read naming them, rather than let the
executors connect differently from the driver. Settings Spark's source owns (group, offsets,
deserializers, isolation) are left to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from cdc.errors import UsageError

_SPARK_OWNS = frozenset({
    "bootstrap.servers", "group.id", "auto.offset.reset", "enable.auto.commit",
    "enable.auto.offset.store", "enable.partition.eof", "isolation.level", "key.deserializer",
    "value.deserializer", "interceptor.classes",
})  # fmt: skip
_UNTRANSLATED = ("sasl.kerberos.", "sasl.oauthbearer.", "ssl.engine.", "ssl.providers",
                 "ssl.certificate.verify_cb", "ssl_engine_callback_data")  # fmt: skip
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
            "(its Java client has no equivalent here); use TLS (with or without a client "
            "certificate) or a SASL PLAIN/SCRAM login instead, or keep replays small enough "
            "for the driver's client ($REPLICATOR_DRIVER_READ_OFFSETS)"
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
    out |= _client_certificate(rest)
    ca, ca_pem = rest.pop("ssl.ca.location", None), rest.pop("ssl.ca.pem", None)
    if ca_pem is not None:
        out |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca_pem}
    elif ca is not None and ca != "probe":  # probe: the system's CAs (the JVM's, for Java)
        out |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
    if rest.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        rest["ssl.endpoint.identification.algorithm"] = ""
    out |= {name: value for name, value in rest.items() if name not in _SPARK_OWNS}
    return {f"kafka.{name}": value for name, value in out.items()}


def _client_certificate(rest: dict[str, str]) -> dict[str, str]:
    """The Java keystore options of the client certificate in ``rest`` (popped from it)."""
    keystore = rest.pop("ssl.keystore.location", None)
    if keystore is not None:
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": keystore}
    cert = _pem(rest, "ssl.certificate.pem", "ssl.certificate.location")
    key = _pem(rest, "ssl.key.pem", "ssl.key.location")
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        given = "ssl.key" if cert is None else "ssl.certificate"
        raise UsageError(f"the Kafka URL gives {given}.* without its pair: a client certificate "
                         "needs ssl.certificate.location and ssl.key.location")  # fmt: skip
    legacy = re.search(r"-----BEGIN (RSA|EC|DSA) PRIVATE KEY-----", key)
    if legacy:
        raise UsageError(
            f"the Kafka URL's client key is a {legacy.group(1)} key in the legacy format, which "
            "Spark's Kafka source (the Java client) cannot read: convert it to PKCS#8 with "
            "`openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8` (-v2 aes256 to keep it "
            "encrypted) and give that file as ssl.key.location"
        )
    if "ENCRYPTED PRIVATE KEY" not in key:  # librdkafka ignores a password the key does not
        rest.pop("ssl.key.password", None)  # need; the Java client would try it and fail
    return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert,
            "ssl.keystore.key": key}  # fmt: skip


def _pem(rest: dict[str, str], inline: str, location: str) -> str | None:
    """The PEM text given inline as ``inline`` or in the file ``location`` (popped from rest)."""
    text, path = rest.pop(inline, None), rest.pop(location, None)
    if text is not None or path is None:
        return text
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"the Kafka URL's {location} {path} cannot be read: {exc}") from exc


def _quoted(text: str | None) -> str:
    """``text`` inside a JAAS double-quoted string."""
    return (text or "").replace("\\", "\\\\").replace('"', '\\"')
