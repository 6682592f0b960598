"""The Spark driver's class archive: the training child's JVM writes it, sessions map it, and a
real session's JVM maps Spark's classes from the archive ``replicator jars`` trained."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdc.runtime import class_archive as archives
from replay import class_archive
from tests.conftest import fake_java


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REPLICATOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(archives.SWITCH_ENV, raising=False)
    monkeypatch.delenv(class_archive.DUMP_ENV, raising=False)
    return tmp_path / "cache"


def test_the_training_childs_driver_writes_the_archive(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = class_archive.archive_path(fake_java(tmp_path), [])
    assert archive.name.startswith("spark-classes-")
    assert class_archive.driver_options(archive) == []
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={archive}" in class_archive.driver_options(archive)
    monkeypatch.setenv(class_archive.DUMP_ENV, str(tmp_path / "new.jsa"))
    options = class_archive.driver_options(archive)
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in options
    assert not any("SharedArchiveFile" in o for o in options)


def test_a_failed_demo_leaves_no_archive(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = class_archive.archive_path(fake_java(tmp_path), [])
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the training child exits 1 at once
    said = class_archive.train(archive)
    assert "not made (exit 1" in said and str(archive.with_suffix(".log")) in said
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
    lines = loads.read_text().splitlines()
    spark_lines = [line for line in lines if "org.apache.spark." in line]
    shared = [line for line in spark_lines if "shared objects file (top)" in line]
    # ~60% of them here (4,557 of 7,371, none without it): classes that Spark's own loaders
    # load or that are generated at run time are not in the archive.
    assert len(shared) > 2_000, (len(shared), len(spark_lines))
    # Its code generator's compiler ships in signed jars, which an archive never holds: the
    # session puts unsigned copies first (``unsigned_copies``) and maps them too.
    janino = [line for line in lines if " org.codehaus." in line]
    assert len(janino) > 100 and all("shared objects file" in line for line in janino), janino[:3]
