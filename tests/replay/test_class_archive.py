"""The driver's class archive: named after what it was made from, used when present, and a real
session's JVM maps Spark's classes from the archive ``replicator jars`` trained."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replay import class_archive


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REPLICATOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.SWITCH_ENV, raising=False)
    monkeypatch.delenv(class_archive.DUMP_ENV, raising=False)
    return tmp_path / "cache"


def _java(tmp_path: Path, name: str = "java") -> str:
    binary = tmp_path / "jdk" / name
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    return str(binary)


def test_archive_is_named_after_the_java_and_the_jars(cache: Path, tmp_path: Path) -> None:
    java = _java(tmp_path)
    jars = [Path("/opt/spark/jars/spark-core_2.13-4.0.1.jar"), Path("/x/delta-spark-4.0.0.jar")]
    path = class_archive.archive_path(java, jars)
    assert path.parent == cache / "jvm" and path.suffix == ".jsa"
    assert class_archive.archive_path(java, list(reversed(jars))) == path
    assert class_archive.archive_path(java, jars[:1]) != path
    assert class_archive.archive_path(_java(tmp_path, "java21"), jars) != path


def test_sessions_map_the_archive_only_when_it_exists(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = class_archive.archive_path(_java(tmp_path), [])
    assert class_archive.driver_options(archive) == []
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={archive}" in class_archive.driver_options(archive)
    monkeypatch.setenv(class_archive.SWITCH_ENV, "off")
    assert class_archive.driver_options(archive) == []
    assert "off" in class_archive.train(archive)
    monkeypatch.setenv(class_archive.DUMP_ENV, str(tmp_path / "new.jsa"))
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in class_archive.driver_options(
        archive
    )


def test_a_failed_training_leaves_no_archive_and_says_where_its_log_is(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = class_archive.archive_path(_java(tmp_path), [])
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the training child exits 1 at once
    said = class_archive.train(archive)
    assert "not made" in said and str(archive.with_suffix(".log")) in said
    assert list(archive.parent.iterdir()) == [archive.with_suffix(".log")]


def test_a_session_maps_sparks_classes_from_the_trained_archive(tmp_path: Path) -> None:
    from replay.spark import driver_class_archive

    archive = driver_class_archive()
    if not archive.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"no class archive at {archive}: `make jars` trains it")
        pytest.skip(f"no class archive at {archive} (`replicator jars` trains it)")
    loads = tmp_path / "class-load.log"
    child = textwrap.dedent("""
        from replay.spark import spark_session
        spark = spark_session()
        assert spark.range(10).count() == 10
        spark.stop()
    """)
    env = {**os.environ, "REPLICATOR_JAVA_OPTIONS": f"-Xlog:class+load=info:file={loads}"}
    subprocess.run([sys.executable, "-c", child], env=env, check=True, timeout=300)
    spark_lines = [line for line in loads.read_text().splitlines() if "org.apache.spark." in line]
    shared = [line for line in spark_lines if "shared objects file (top)" in line]
    # ~60% of them here (4,557 of 7,371, none without it): classes that Spark's own loaders
    # load or that are generated at run time are not in the archive.
    assert len(shared) > 2_000, (len(shared), len(spark_lines))
