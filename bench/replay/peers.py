"""The Kafka Streams peer (``bench/peers/kafka-streams``): built with Maven, run as a JVM.

``ensure_built`` runs ``mvn package`` with the repository's ``settings.xml`` (Maven Central only)
and local repository (``.cache/m2``) into ``.cache/bench/kafka-streams`` when the pom or the Java
source changed since the last build (a fingerprint file records them).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from cdc.runtime import jars

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "bench" / "peers" / "kafka-streams"
BUILD = jars.cache_dir() / "bench" / "kafka-streams"


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted([PEER / "pom.xml", *PEER.glob("src/**/*.java")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_built() -> Path:
    """The build directory of the peer (classes/, lib/), built if needed."""
    stamp = BUILD / "fingerprint"
    wanted = _fingerprint()
    if stamp.is_file() and stamp.read_text() == wanted and (BUILD / "classes").is_dir():
        return BUILD
    print("building the Kafka Streams peer (mvn package) ...", flush=True)
    subprocess.run(
        [
            "mvn", "-B", "-q", "-s", str(jars.JVM_DIR / "settings.xml"),
            "-f", str(PEER / "pom.xml"),
            f"-Dmaven.repo.local={jars.cache_dir() / 'm2'}", f"-Dbench.build.dir={BUILD}",
            "package",
        ],
        check=True,
    )  # fmt: skip
    stamp.write_text(wanted)
    return BUILD


def kafka_streams_command(
    bootstrap: str, topic: str, app_id: str, state_dir: Path, threads: int, heap: str
) -> list[str]:
    """The command that restores ``topic`` into a KTable (prints one JSON line at the end)."""
    build = ensure_built()
    classpath = f"{build / 'classes'}:{build / 'lib'}/*"
    return [
        jars.java_executable(), f"-Xmx{heap}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", classpath, "bench.KTableRestore",
        bootstrap, topic, app_id, str(state_dir), str(threads),
    ]  # fmt: skip


def versions() -> dict[str, str]:
    """The Kafka Streams and RocksDB jars the peer runs with."""
    lib = ensure_built() / "lib"
    names = [p.name.removesuffix(".jar") for p in lib.glob("*.jar")]
    return {
        n.rsplit("-", 1)[0]: n.rsplit("-", 1)[1]
        for n in names
        if n.startswith(("kafka-streams", "rocksdbjni"))
    }
