"""Resolves the JVM components (Kafka broker, Spark's Kafka source, Delta) from Maven Central.

Each component is a checked-in pom under ``cdc/runtime/jvm/``. ``mvn dependency:copy-dependencies``
copies its runtime jars into ``<cache>/jars/<component>``; a manifest keyed by the pom's hash makes
a second resolution a no-op that touches neither Maven nor the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from cdc.errors import SetupError

JVM_DIR = Path(__file__).resolve().parent / "jvm"
COMPONENTS = ("kafka-broker", "spark-extras")
MIN_JAVA = 17
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


def cache_dir() -> Path:
    """Where jars and local data live: ``$REPLICATOR_CACHE``, else ``.cache`` in a source
    checkout, else ``~/.cache/cdc-replicator``."""
    if env := os.environ.get("REPLICATOR_CACHE"):
        return Path(env).resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "cdc-replicator"


def cache_file(relative: str, text: str) -> Path:
    """The file ``relative`` to ``cache_dir()`` holding ``text`` (a JVM's configuration): written
    only when it holds something else, and by a rename, so a JVM starting beside never reads
    half of it."""
    path = cache_dir() / relative
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        temporary = Path(out.name)
        try:
            out.write(text)
            out.close()
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    return path


def java_executable() -> str:
    """The ``java`` to run (``$JAVA_HOME/bin/java`` first), checked to be Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise SetupError(
            "Java not found on PATH: install a JDK 17+ "
            "(apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise SetupError(
            f"{java} is Java {major or '?'}; Kafka 4 and Spark 4 need Java {MIN_JAVA}+"
        )
    return java


def resolve(component: str, *, extra_exclusions: set[str] | None = None) -> list[Path]:
    """The jars of ``component``, resolving them from Maven Central on first use.

    ``extra_exclusions`` names artifacts not to keep (those another classpath already has).
    """
    if component not in COMPONENTS:
        raise ValueError(f"unknown JVM component {component!r}; known: {', '.join(COMPONENTS)}")
    pom = JVM_DIR / component / "pom.xml"
    target = cache_dir() / "jars" / component
    manifest = target / "manifest.json"
    digest = _fingerprint(pom, extra_exclusions)
    if manifest.is_file():
        recorded = json.loads(manifest.read_text())
        jars = [target / name for name in recorded.get("jars", [])]
        if recorded.get("fingerprint") == digest and all(j.is_file() for j in jars):
            return jars
    return _resolve_now(component, pom, target, digest, extra_exclusions or set())


def _fingerprint(pom: Path, exclusions: set[str] | None) -> str:
    h = hashlib.sha256(pom.read_bytes())
    h.update((JVM_DIR / "settings.xml").read_bytes())
    h.update(",".join(sorted(exclusions or ())).encode())
    return h.hexdigest()


def _resolve_now(
    component: str, pom: Path, target: Path, digest: str, exclusions: set[str]
) -> list[Path]:
    java_executable()
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("Maven (mvn) not found on PATH: install it (apt-get install maven)")
    staging = target.with_name(target.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    log = target.with_name(f"{component}.mvn.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        mvn, "-B", "-s", str(JVM_DIR / "settings.xml"), "-f", str(pom),
        f"-Dmaven.repo.local={cache_dir() / 'm2'}",
        "dependency:copy-dependencies", "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    with log.open("w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        errors = [ln for ln in log.read_text().splitlines() if "[ERROR]" in ln]
        first = errors[0].replace("[ERROR]", "").strip() if errors else "see the log"
        raise SetupError(
            f"Maven could not resolve {component} from Maven Central ({first[:300]}); "
            f"check access to Maven Central and the versions in {pom}; full log: {log}"
        )
    kept = []
    for jar in sorted(staging.glob("*.jar")):
        match = _JAR_NAME.match(jar.name)
        if match and match.group("artifact") in exclusions:
            jar.unlink()
        else:
            kept.append(jar.name)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / "manifest.json").write_text(json.dumps({"fingerprint": digest, "jars": kept}))
    return [target / name for name in kept]


def artifact_names(jar_dir: Path) -> set[str]:
    """Artifact names (file names without version) of the jars in ``jar_dir``."""
    names = set()
    for jar in jar_dir.glob("*.jar"):
        if match := _JAR_NAME.match(jar.name):
            names.add(match.group("artifact"))
    return names
