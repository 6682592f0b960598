"""A class-data-sharing archive of the Spark driver's classes, so that a session starts faster.

A cold JVM loads, parses and verifies some 17,000 classes from jars before and while Spark plans
its first queries: ~1.8 s of a session's start and 1.2-1.7 s of its first rebuild on two cores
(``bench/README.md``). HotSpot's class-data sharing maps them from an archive instead.
``replicator jars`` trains one once: a child process runs a small demo (local log, rebuilds into
DuckDB and Delta, a projection, a point-in-time rebuild) on a JVM that writes the classes it
loaded when it exits (``-XX:ArchiveClassesAtExit``); every later session on this machine maps
them (``-XX:SharedArchiveFile``). The archive is named after what it was made from (the ``java``
binary, pyspark's jars, the extra jars): another JDK or pyspark needs (and trains) its own, and
a session whose archive is missing or refused by the JVM starts the slow way, silently.
``REPLICATOR_CLASS_ARCHIVE=off`` turns both off.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cdc.runtime import jars

SWITCH_ENV = "REPLICATOR_CLASS_ARCHIVE"
DUMP_ENV = "REPLICATOR_CLASS_ARCHIVE_DUMP"
"""Set in the training child: its session's JVM writes the archive to this path at exit."""
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # thousands of "skipped class" warnings
_TRAINING_TIMEOUT_S = 900


def enabled() -> bool:
    """Whether sessions use (and ``replicator jars`` trains) the archive."""
    return os.environ.get(SWITCH_ENV, "on").strip().lower() not in {"off", "0", "false", "no"}


def archive_path(java: str, classpath: Sequence[Path]) -> Path:
    """Where the archive for this ``java`` and the driver's jars lives (in the jar cache)."""
    binary = Path(java).resolve()
    made = binary.stat()
    key = "\n".join(
        [str(binary), str(made.st_size), str(made.st_mtime_ns), *sorted(map(str, classpath))]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return jars.cache_dir() / "jvm" / f"spark-classes-{digest}.jsa"


def driver_options(archive: Path) -> list[str]:
    """The driver JVM's options: write the archive (training child), map it, or nothing."""
    if dump := os.environ.get(DUMP_ENV):
        return [f"-XX:ArchiveClassesAtExit={dump}", *_QUIET]
    if enabled() and archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}", *_QUIET]
    return []


def train(archive: Path) -> str:
    """Make ``archive`` unless it exists (or the switch is off); one line saying what happened.
    A failed training leaves no archive behind and is reported, not raised: sessions work
    without one."""
    if not enabled():
        return f"class archive: off (${SWITCH_ENV})"
    if archive.is_file():
        return f"class archive: {archive}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    log = archive.with_suffix(".log")
    with tempfile.TemporaryDirectory(prefix="replicator-class-archive-") as work:
        command = [
            sys.executable, "-m", "replay.cli.main", "demo", "--out", f"{work}/demo",
            *("--payments", "3000", "--customers", "300", "--tickets", "1000"),
        ]  # fmt: skip
        with log.open("w") as out:
            # A group of its own: pyspark leaves its JVM running when the demo's process exits,
            # and the JVM writes the archive as it exits.
            child = subprocess.Popen(
                command, env={**os.environ, DUMP_ENV: str(partial)}, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            try:
                status = child.wait(timeout=_TRAINING_TIMEOUT_S)
                _wait_for_group(child.pid, _TRAINING_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                status = -signal.SIGKILL
                _wait_for_group(child.pid, 0)
    if status != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return f"class archive: not made (exit {status}, see {log}): sessions start slower"
    os.replace(partial, archive)
    for older in archive.parent.glob("spark-classes-*"):  # archives of other JDKs or jars
        if not older.name.startswith(archive.stem):
            older.unlink(missing_ok=True)
    return f"class archive: made {archive} ({archive.stat().st_size // 2**20} MiB)"


def _wait_for_group(group: int, timeout_s: float) -> None:
    """Wait until no process of the process ``group`` is left (kill them after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.killpg(group, signal.SIGKILL if time.monotonic() > deadline else 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
