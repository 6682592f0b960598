"""A throw-away certificate authority for the local broker's TLS listener (tests and trials).

:func:`make_local_pki` has ``openssl`` (the system's) write a CA, a server certificate for
127.0.0.1 and a client certificate, each key unencrypted PKCS#8 PEM: what both librdkafka and
the Java client (PEM keystores) read. Never for production: the keys sit in plain files.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cdc.errors import SetupError

_DAYS = "30"


@dataclass(frozen=True)
class LocalPki:
    """The PEM files of a local CA, the broker's certificate and a client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_settings(self) -> dict[str, str]:
        """librdkafka settings of a client presenting the client certificate (mutual TLS)."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca),
            "ssl.certificate.location": str(self.client_cert),
            "ssl.key.location": str(self.client_key),
        }


def make_local_pki(directory: Path) -> LocalPki:
    """Create (or reuse) the CA and the two certificates under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = LocalPki(*(directory / n for n in (
        "ca.pem", "server.pem", "server.key", "client.pem", "client.key")))  # fmt: skip
    if all(p.is_file() for p in (pki.ca, pki.server_cert, pki.client_cert)):
        return pki
    if shutil.which("openssl") is None:
        raise SetupError("a TLS listener needs the openssl command (Debian package openssl)")
    ca_key = directory / "ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", pki.ca,
             "-days", _DAYS, "-subj", "/CN=replicator local CA")  # fmt: skip
    _issue(directory, pki.server_cert, pki.server_key, "127.0.0.1", "IP:127.0.0.1", pki.ca, ca_key)
    _issue(directory, pki.client_cert, pki.client_key, "replicator-client", None, pki.ca, ca_key)
    return pki


def _issue(
    directory: Path, cert: Path, key: Path, name: str, alt_name: str | None, ca: Path, ca_key: Path
) -> None:
    """A certificate for ``name`` (and ``alt_name``) signed by the CA."""
    request = directory / f"{cert.stem}.csr"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request,
             "-subj", f"/CN={name}")  # fmt: skip
    extensions = directory / f"{cert.stem}.ext"
    wanted = f"subjectAltName={alt_name}" if alt_name else "basicConstraints=CA:FALSE"
    extensions.write_text(wanted + "\n")
    _openssl("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", _DAYS, "-extfile", extensions)  # fmt: skip


def _openssl(*args: str | Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SetupError(f"openssl {args[0]} failed: {done.stderr.strip()[-300:]}")
