"""Class-data-sharing archives for the project's JVMs (the Spark driver, the Kafka broker).

A cold JVM loads, parses and verifies every class it needs from jars: ~17,000 for a Spark
session and its first queries, most of a broker's start. HotSpot's class-data sharing maps them
from an archive instead. ``replicator jars`` trains one per JVM kind, once: a workload runs on a
JVM started with ``-XX:ArchiveClassesAtExit``, which writes the classes it loaded when it exits;
later JVMs of that kind start with ``-XX:SharedArchiveFile``. An archive is named after what it
was made from (the ``java`` binary, every jar on the classpath, with their sizes and times,
which the JVM checks): another JDK or jar set trains its own, and a JVM that cannot use one
starts without it, silently. No archive holds a class of a signed jar: ``unsigned_copies`` makes
copies to put first. A JDK feature: nothing to install. ``REPLICATOR_CLASS_ARCHIVE=off`` turns
training and use off.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from cdc.runtime import jars

SWITCH_ENV = "REPLICATOR_CLASS_ARCHIVE"
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # thousands of "skipped class" warnings
_SIGNATURE = re.compile(r"^META-INF/(?:[^/]+\.(?:SF|RSA|DSA|EC)|SIG-[^/]+)$", re.IGNORECASE)
_MANIFEST = "META-INF/MANIFEST.MF"

Workload = Callable[[Path, TextIO], int]
"""Runs a JVM started with ``dump_options(path)``, writing its output to the file; returns its
exit status once the JVM has exited (which is when it writes the archive to ``path``)."""


def enabled() -> bool:
    """Whether JVMs use (and ``replicator jars`` trains) class archives."""
    return os.environ.get(SWITCH_ENV, "on").strip().lower() not in {"off", "0", "false", "no"}


def archive_path(kind: str, java: str, classpath: Sequence[Path]) -> Path:
    """Where the archive of ``kind`` for this ``java`` and these jars lives (the jar cache)."""
    digest = _digest([_identity(Path(java).resolve()), *sorted(map(_identity, classpath))])
    return jars.cache_dir() / "jvm" / f"{kind}-classes-{digest}.jsa"


def _digest(lines: Sequence[str]) -> str:
    """16 hex digits of the lines' SHA-256: what names a file made from them in the cache."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _identity(path: Path) -> str:
    """A file's path, size and time (what an archive checks of its jars); its path alone if it
    is not there."""
    try:
        found = path.stat()
    except OSError:
        return str(path)
    return f"{path}:{found.st_size}:{found.st_mtime_ns}"


def unsigned_copies(classpath: Sequence[Path]) -> list[Path]:
    """Unsigned copies of the signed jars of ``classpath``, to put before it: HotSpot never
    archives a class of a signed jar, and Spark's code generator (Janino, ~430 classes that every
    cold session parses and verifies again) ships signed. Same classes, without the signature
    files and the manifest's digests; made once per classpath in the jar cache. None while the
    switch is off, or if they cannot be made (the JVM then loads the signed jars, slower)."""
    if not enabled():
        return []
    made = jars.cache_dir() / "jvm" / f"unsigned-{_digest(sorted(map(_identity, classpath)))}"
    if not made.is_dir():
        try:
            _make_copies(classpath, made)
        except (OSError, zipfile.BadZipFile):
            return []
    return sorted(made.glob("*.jar"))


def _make_copies(classpath: Sequence[Path], made: Path) -> None:
    made.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{made.name}.", dir=made.parent))
    try:
        work.chmod(0o755)
        for jar in classpath:
            _copy_unsigned(jar, work / jar.name)
        try:
            os.rename(work, made)  # whole or not at all
        except OSError:
            if not made.is_dir():  # else a racing twin made the same copies first
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _copy_unsigned(jar: Path, copy: Path) -> None:
    """Write ``jar`` without its signature files to ``copy``, if it has any."""
    with zipfile.ZipFile(jar) as signed:
        entries = signed.infolist()
        if not any(_SIGNATURE.match(e.filename) for e in entries):
            return
        with zipfile.ZipFile(copy, "w") as unsigned:
            for entry in entries:
                if _SIGNATURE.match(entry.filename):
                    continue
                data = signed.read(entry)
                if entry.filename.upper() == _MANIFEST:
                    data = _main_section(data)
                unsigned.writestr(entry, data, entry.compress_type)
    source = jar.stat()  # a copy made again (the same bytes) keeps the archive's key
    os.utime(copy, ns=(source.st_atime_ns, source.st_mtime_ns))


def _main_section(manifest: bytes) -> bytes:
    """A manifest's main attributes, without the per-entry sections (a signed jar's digests,
    which still mark a jar signed for HotSpot)."""
    kept = []
    for line in manifest.splitlines(keepends=True):
        if not line.strip():
            break
        kept.append(line)
    main = b"".join(kept)
    return main if main.endswith((b"\n", b"\r")) else main + b"\r\n"  # a last line needs one


def use_options(archive: Path) -> list[str]:
    """A JVM's options to map ``archive``: none if it does not exist or the switch is off."""
    if enabled() and archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}", *_QUIET]
    return []


def dump_options(path: Path | str) -> list[str]:
    """A JVM's options to write the classes it loaded to ``path`` when it exits."""
    return [f"-XX:ArchiveClassesAtExit={path}", *_QUIET]


def train(archive: Path, workload: Workload) -> str:
    """Make ``archive`` by running ``workload`` unless it exists (or the switch is off); one line
    saying what happened. A failed training leaves no archive behind and is reported, not
    raised: the JVMs work without one."""
    kind = archive.name.split("-classes-")[0]
    if not enabled():
        return f"{kind} class archive: off (${SWITCH_ENV})"
    if archive.is_file():
        return f"{kind} class archive: {archive}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    log = archive.with_suffix(".log")
    with log.open("w") as out:
        status = workload(partial, out)
    if status != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return f"{kind} class archive: not made (exit {status}, see {log}): it starts slower"
    os.replace(partial, archive)
    for older in archive.parent.glob(f"{kind}-classes-*"):  # of another JDK or jar set
        if not older.name.startswith(archive.stem):
            older.unlink(missing_ok=True)
    return f"{kind} class archive: made {archive} ({archive.stat().st_size // 2**20} MiB)"


def wait_for_group(group: int, timeout_s: float) -> None:
    """Wait until no process of the process ``group`` is left (kill them after ``timeout_s``):
    a JVM a child process left running may still be writing its archive."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.killpg(group, signal.SIGKILL if time.monotonic() > deadline else 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
