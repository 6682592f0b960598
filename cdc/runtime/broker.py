"""A single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1.

The broker's jars come from :mod:`cdc.runtime.jars`; its storage is formatted on first start, its
log goes to ``<data_dir>/broker.log``. Used by ``replicator broker`` and the test suite.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from cdc.errors import SetupError
from cdc.runtime import class_archive, jars
from cdc.runtime.service import LocalService, terminate_group
from cdc.runtime.tls import LocalPki

_TRAINING_STOP_S = 120.0
_SIGTERM_EXIT = 143  # a JVM's status when SIGTERM ran its shutdown hooks

_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}{secured}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}{secured}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL
inter.broker.listener.name=PLAINTEXT
log.dirs={log_dir}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
auto.create.topics.enable=false
log.cleaner.backoff.ms=1000
"""

_LOG4J2 = """\
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _sasl_settings(users: Mapping[str, str]) -> str:
    """The properties of a SASL_PLAINTEXT listener taking PLAIN logins of ``users``."""
    logins = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return (
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        f"org.apache.kafka.common.security.plain.PlainLoginModule required {logins};\n"
    )


def _tls_settings(pki: LocalPki, keystore: Path) -> str:
    """The properties of an SSL listener requiring a client certificate signed by ``pki.ca``;
    writes the server's key and certificate into ``keystore`` (a Java PEM keystore is one file)."""
    keystore.write_text(pki.server_key.read_text() + pki.server_cert.read_text())
    return (
        "listener.name.ssl.ssl.keystore.type=PEM\n"
        f"listener.name.ssl.ssl.keystore.location={keystore}\n"
        "listener.name.ssl.ssl.truststore.type=PEM\n"
        f"listener.name.ssl.ssl.truststore.location={pki.ca}\n"
        "listener.name.ssl.ssl.client.auth=required\n"
    )


class LocalKafkaBroker(LocalService):
    """Starts and stops one KRaft broker; ``bootstrap_servers`` is valid after :meth:`start`.

    With ``sasl_users`` (name -> password) it also listens on ``sasl_port`` for SASL_PLAINTEXT
    clients logging in with PLAIN, and with ``tls`` on ``ssl_port`` for TLS clients presenting a
    certificate of that CA (mutual TLS): how secured clusters are reached, for tests and trials."""

    def __init__(
        self, data_dir: Path, port: int = 0, controller_port: int = 0, heap: str = "768m",
        *, sasl_users: Mapping[str, str] | None = None, tls: LocalPki | None = None,
        jvm_options: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self.data_dir = data_dir.resolve()
        self.port = port
        self.controller_port = controller_port
        self.heap = heap
        self.sasl_users = dict(sasl_users or {})
        self.sasl_port = 0
        self.tls = tls
        self.ssl_port = 0
        self.jvm_options = list(jvm_options)
        self.log_file = self.data_dir / "broker.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 90.0) -> str:
        """Format storage if new, start the broker, and wait until it serves clients."""
        java, found = jars.java_executable(), jars.resolve("kafka-broker")
        classpath = os.pathsep.join(map(str, found))
        archive = class_archive.use_options(broker_class_archive(java, found))
        for name in ("port", "controller_port"):
            wanted = getattr(self, name)
            if wanted and _port_in_use(wanted):
                raise SetupError(
                    f"port {wanted} on 127.0.0.1 is already in use: stop what holds it "
                    "or choose another (0 picks a free port)"
                )
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        if self.sasl_users:
            self.sasl_port = self.sasl_port or free_port()
        secured = f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}" if self.sasl_users else ""
        if self.tls:
            self.ssl_port = self.ssl_port or free_port()
            secured += f",SSL://127.0.0.1:{self.ssl_port}"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props, log4j = self.data_dir / "server.properties", self.data_dir / "log4j2.properties"
        log_dir = self.data_dir / "kraft-logs"
        props.write_text(
            _SERVER_PROPERTIES.format(
                port=self.port, controller_port=self.controller_port, log_dir=log_dir,
                secured=secured,
            )
            + (_sasl_settings(self.sasl_users) if self.sasl_users else "")
            + (_tls_settings(self.tls, self.data_dir / "server-keystore.pem") if self.tls else "")
        )  # fmt: skip
        log4j.write_text(_LOG4J2.format(log_file=self.log_file))
        jvm = [java, f"-Xmx{self.heap}", *archive, f"-Dlog4j2.configurationFile={log4j}"]
        jvm += ["-cp", classpath]
        if not (log_dir / "meta.properties").exists():
            cluster_id = "-"
            while cluster_id.startswith("-"):  # the storage tool would read it as an option
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            fmt = subprocess.run(
                [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if fmt.returncode != 0:
                raise SetupError(
                    f"formatting Kafka storage in {log_dir} failed: {fmt.stderr[-300:]}"
                )
        started_at = self.log_file.stat().st_size if self.log_file.exists() else 0
        stdout = (self.data_dir / "broker.stdout").open("ab")
        self._process = subprocess.Popen(
            [*jvm, *self.jvm_options, "kafka.Kafka", str(props)], stdout=stdout,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self._wait_ready(started_at, timeout_s)
        return self.bootstrap_servers

    def _wait_ready(self, log_offset: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise SetupError(
                    f"the Kafka broker exited during start ({self._last_error(log_offset)}); "
                    f"full log: {self.log_file}"
                )
            if self._log_since(log_offset).find("Kafka Server started") >= 0 and _port_in_use(
                self.port
            ):
                return
            time.sleep(0.2)
        self.stop()
        raise SetupError(
            f"the Kafka broker did not start within {timeout_s:.0f}s; log: {self.log_file}"
        )

    def _log_since(self, offset: int) -> str:
        if not self.log_file.exists():
            return ""
        with self.log_file.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def _last_error(self, offset: int) -> str:
        lines = self._log_since(offset).splitlines()
        stdout = self.data_dir / "broker.stdout"
        if stdout.exists():
            lines += stdout.read_text(errors="replace").splitlines()[-20:]
        errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
        return (errors[0] if errors else (lines[-1] if lines else "no output"))[:300]

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout_s``)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        terminate_group(process, timeout_s)


def broker_class_archive(java: str, found: Sequence[Path]) -> Path:
    """The broker JVM's class archive for this ``java`` and the broker's jars."""
    return class_archive.archive_path("kafka-broker", java, found)


def train_class_archive() -> str:
    """Make the broker's class archive unless it exists (``class_archive.train``): trained on a
    broker's start, storage format included, and stop (1.1 s of a ~2.8 s start, bench/README)."""

    def start_and_stop(dump: Path, out: TextIO) -> int:
        with tempfile.TemporaryDirectory(prefix="replicator-broker-archive-") as work:
            broker = LocalKafkaBroker(Path(work), jvm_options=class_archive.dump_options(dump))
            try:
                broker.start()
            except SetupError as error:
                out.write(f"{error}\n")
                return 1
            process = broker._process
            broker.stop(timeout_s=_TRAINING_STOP_S)  # the JVM writes the archive as it exits
            code = process.returncode if process else None
            return 0 if code in (0, _SIGTERM_EXIT) else (code if code is not None else 1)

    archive = broker_class_archive(jars.java_executable(), jars.resolve("kafka-broker"))
    return class_archive.train(archive, start_and_stop)
