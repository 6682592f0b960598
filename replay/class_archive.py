"""The Spark driver's class archive (:mod:`cdc.runtime.class_archive`), so that a session
starts faster: ~1.8 s of a session's start and 1.2-1.7 s of its first rebuild on two cores
(``bench/README.md``). It is trained on the demo at a small size (local log, rebuilds into
DuckDB and Delta, a projection, a point-in-time rebuild), run in a child process whose session's
JVM writes the classes it loaded when it exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from cdc.runtime import class_archive

DUMP_ENV = "REPLICATOR_CLASS_ARCHIVE_DUMP"
"""Set in the training child: its session's JVM writes the archive to this path at exit."""
_TRAINING_TIMEOUT_S = 900


def archive_path(java: str, classpath: Sequence[Path]) -> Path:
    """Where the driver's archive for this ``java`` and these jars lives."""
    return class_archive.archive_path("spark", java, classpath)


def driver_options(archive: Path) -> list[str]:
    """The driver JVM's options: write the archive (training child), map it, or nothing."""
    if dump := os.environ.get(DUMP_ENV):
        return class_archive.dump_options(dump)
    return class_archive.use_options(archive)


def train(archive: Path) -> str:
    """Make the driver's ``archive`` unless it exists (``class_archive.train``)."""
    return class_archive.train(archive, _run_demo)


def _run_demo(dump: Path, out: TextIO) -> int:
    with tempfile.TemporaryDirectory(prefix="replicator-class-archive-") as work:
        command = [
            sys.executable, "-m", "replay.cli.main", "demo", "--out", f"{work}/demo",
            *("--payments", "3000", "--customers", "300", "--tickets", "1000"),
        ]  # fmt: skip
        # A group of its own: pyspark leaves its JVM running when the demo's process exits,
        # and the JVM writes the archive as it exits.
        child = subprocess.Popen(
            command, env={**os.environ, DUMP_ENV: str(dump)}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            status = child.wait(timeout=_TRAINING_TIMEOUT_S)
            class_archive.wait_for_group(child.pid, _TRAINING_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            status = -signal.SIGKILL
            class_archive.wait_for_group(child.pid, 0)
    return status
