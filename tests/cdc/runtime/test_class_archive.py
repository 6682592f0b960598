"""Class archives: named after what they were made from, used only when present, trained by a
workload (an in-memory one here) with nothing left behind on failure, and a real broker's JVM
maps Kafka's classes from the archive ``replicator jars`` trained."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path
from typing import TextIO

import pytest

from cdc.runtime import class_archive, jars
from cdc.runtime.broker import LocalKafkaBroker, broker_class_archive
from tests.conftest import fake_java


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REPLICATOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.SWITCH_ENV, raising=False)
    return tmp_path / "cache"


def writing(content: bytes, status: int = 0) -> class_archive.Workload:
    """A workload that writes ``content`` where the archive goes, then exits ``status``."""

    def run(dump: Path, out: TextIO) -> int:
        if content:
            dump.write_bytes(content)
        out.write("ran\n")
        return status

    return run


def test_an_archive_is_named_after_its_kind_the_java_and_the_jars(
    cache: Path, tmp_path: Path
) -> None:
    java = fake_java(tmp_path)
    found = [Path("/opt/spark/jars/spark-core_2.13-4.1.3.jar"), Path("/x/delta-spark-4.4.0.jar")]
    path = class_archive.archive_path("spark", java, found)
    assert path.parent == cache / "jvm" and path.name.startswith("spark-classes-")
    assert path.suffix == ".jsa"
    assert class_archive.archive_path("spark", java, list(reversed(found))) == path
    assert class_archive.archive_path("spark", java, found[:1]) != path
    assert class_archive.archive_path("spark", fake_java(tmp_path, "java21"), found) != path
    assert class_archive.archive_path("kafka-broker", java, found) != path


def test_jvms_map_an_archive_only_when_it_exists_and_the_switch_is_on(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = class_archive.archive_path("spark", fake_java(tmp_path), [])
    assert class_archive.use_options(archive) == []
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={archive}" in class_archive.use_options(archive)
    monkeypatch.setenv(class_archive.SWITCH_ENV, "off")
    assert class_archive.use_options(archive) == []
    said = class_archive.train(archive.with_name("spark-classes-0.jsa"), writing(b"x"))
    assert "off" in said and not archive.with_name("spark-classes-0.jsa").exists()


def test_training_replaces_older_archives_of_its_kind_only(cache: Path, tmp_path: Path) -> None:
    java = fake_java(tmp_path)
    old = class_archive.archive_path("spark", java, [Path("/old.jar")])
    other = class_archive.archive_path("kafka-broker", java, [])
    for path in (old, old.with_suffix(".log"), other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"kept?")
    new = class_archive.archive_path("spark", java, [Path("/new.jar")])
    said = class_archive.train(new, writing(b"classes"))
    assert said.startswith(f"spark class archive: made {new}")
    assert new.read_bytes() == b"classes" and new.with_suffix(".log").read_text() == "ran\n"
    assert not old.exists() and not old.with_suffix(".log").exists() and other.exists()
    assert class_archive.train(new, writing(b"again")) == f"spark class archive: {new}"
    assert new.read_bytes() == b"classes"


@pytest.mark.parametrize(("content", "status"), [(b"partial", 1), (b"", 0)])
def test_a_failed_training_leaves_no_archive_and_says_where_its_log_is(
    cache: Path, tmp_path: Path, content: bytes, status: int
) -> None:
    archive = class_archive.archive_path("spark", fake_java(tmp_path), [])
    said = class_archive.train(archive, writing(content, status))
    assert "not made" in said and str(archive.with_suffix(".log")) in said
    assert list(archive.parent.iterdir()) == [archive.with_suffix(".log")]


def _jar(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as jar:
        for name, data in entries.items():
            jar.writestr(name, data)
    return path


MAIN = b"Manifest-Version: 1.0\r\nImplementation-Version: 3.1.9\r\n"
CLASSES = {"a/B.class": b"\xca\xfe" * 99, "a/C.class": b"\xba\xbe" * 50}
SIGNED = {
    "META-INF/MANIFEST.MF": MAIN + b"\r\nName: a/B.class\r\nSHA-256-Digest: x=\r\n\r\n",
    **CLASSES, "META-INF/SIGNER.SF": b"sf", "META-INF/SIGNER.RSA": b"rsa", "META-INF/SIG-X": b"",
}  # fmt: skip


def _contents(jar: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(jar) as opened:
        return {e.filename: opened.read(e) for e in opened.infolist()}


def test_signed_jars_get_unsigned_copies_with_the_same_classes_once(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = _jar(tmp_path / "janino-3.1.9.jar", SIGNED)
    unsigned = _jar(tmp_path / "plain-1.0.jar", {"META-INF/MANIFEST.MF": MAIN, **CLASSES})
    (copy,) = class_archive.unsigned_copies([signed, unsigned])
    assert copy.name == signed.name and copy.parent.parent == cache / "jvm"
    assert _contents(copy) == {"META-INF/MANIFEST.MF": MAIN, **CLASSES}  # no digests either
    with zipfile.ZipFile(copy) as jar:
        assert jar.getinfo("a/B.class").compress_type == zipfile.ZIP_DEFLATED
    assert copy.stat().st_mtime_ns == signed.stat().st_mtime_ns  # what an archive checks
    made, data = copy.stat().st_mtime_ns, copy.read_bytes()
    assert class_archive.unsigned_copies([unsigned, signed]) == [copy]  # made once
    assert copy.stat().st_mtime_ns == made
    shutil.rmtree(copy.parent)
    assert class_archive.unsigned_copies([signed, unsigned]) == [copy]  # made again: the same
    assert copy.read_bytes() == data and copy.stat().st_mtime_ns == made
    assert sorted(p.name for p in (cache / "jvm").iterdir()) == [copy.parent.name]  # no temp
    assert class_archive.unsigned_copies([unsigned]) == []
    other = _jar(tmp_path / "other-2.0.jar", CLASSES)  # another classpath: copies of its own
    (again,) = class_archive.unsigned_copies([signed, unsigned, other])
    assert again.name == copy.name and again != copy
    monkeypatch.setenv(class_archive.SWITCH_ENV, "off")
    assert class_archive.unsigned_copies([signed]) == []


def test_copies_a_twin_made_first_are_used_and_none_when_they_cannot_be_made(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = _jar(tmp_path / "janino-3.1.9.jar", SIGNED)
    rename = os.rename

    def twin_first(work: Path, made: Path) -> None:  # a twin process renames its copies first
        rename(shutil.copytree(work, Path(f"{made}.twin")), made)
        rename(work, made)

    monkeypatch.setattr(os, "rename", twin_first)
    (copy,) = class_archive.unsigned_copies([signed])
    assert _contents(copy)["a/B.class"] == CLASSES["a/B.class"]
    assert [p.name for p in (cache / "jvm").iterdir()] == [copy.parent.name]
    broken = tmp_path / "broken-1.0.jar"
    broken.write_bytes(b"not a zip")
    assert class_archive.unsigned_copies([signed, broken]) == []  # the signed jars, slower
    assert [p.name for p in (cache / "jvm").iterdir()] == [copy.parent.name]


def test_a_broker_maps_kafkas_classes_from_the_trained_archive(tmp_path: Path) -> None:
    archive = broker_class_archive(jars.java_executable(), jars.resolve("kafka-broker"))
    if not archive.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"no broker class archive at {archive}: `make jars` trains it")
        pytest.skip(f"no broker class archive at {archive} (`replicator jars` trains it)")
    loads = tmp_path / "class-load.log"
    logged = [f"-Xlog:class+load=info:file={loads}"]
    broker = LocalKafkaBroker(tmp_path / "broker", jvm_options=logged)
    broker.start()
    broker.stop()
    kafka = [line for line in loads.read_text().splitlines() if " org.apache.kafka." in line]
    shared = [line for line in kafka if "shared objects file (top)" in line]
    assert len(shared) > 1_000, (len(shared), len(kafka))
