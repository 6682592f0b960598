"""The repository stands alone: a clone with no sibling folders collects the whole suite and
passes the tests that read the published Debezium records, and no tracked file reaches outside
the checkout for material."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEBEZIUM_FIXTURES, REPO_ROOT

# Spelled in parts so that this file does not match itself.
_OUTSIDE = re.compile(r"\.\./" + 'shared|parent\\s*/\\s*"' + 'shared"')


def _tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file()]


def test_no_tracked_file_reaches_outside_the_checkout() -> None:
    code = [
        name
        for name in _tracked_files()
        if name.endswith((".py", ".sh", ".toml")) or name in ("Makefile", ".ci/run")
    ]
    reaching = [name for name in code if _OUTSIDE.search((REPO_ROOT / name).read_text())]
    assert reaching == []


def test_the_published_records_are_in_the_repository() -> None:
    names = sorted(p.name for p in DEBEZIUM_FIXTURES.glob("*.json"))
    assert len(names) == 36
    sources = (DEBEZIUM_FIXTURES / "SOURCES.md").read_text()
    assert [n for n in names if n not in sources] == []


@pytest.mark.integration
def test_a_lone_copy_collects_everything_and_reads_its_own_fixtures(tmp_path: Path) -> None:
    """The tracked files, copied into an empty directory (nothing beside them), collect every
    test and pass the published-record tests, importing the copy's packages."""
    copy = tmp_path / "alone" / "repo"
    for name in _tracked_files():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, copy / name)
    env = {**os.environ, "PYTHONPATH": str(copy), "REPLICATOR_CACHE": str(tmp_path / "cache")}
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0"]

    collected = subprocess.run(
        [*base, "--collect-only"], cwd=copy, env=env, capture_output=True, text=True
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    assert re.search(r"^\d{3,} tests collected", collected.stdout, re.M), collected.stdout[-500:]

    ran = subprocess.run(
        [*base, "tests/cdc/events"], cwd=copy, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert str(copy) in subprocess.run(
        [sys.executable, "-c", "import cdc; print(cdc.__file__)"],
        cwd=copy, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    passed = re.search(r"(\d+) passed", ran.stdout)
    assert passed and int(passed.group(1)) >= 36, ran.stdout[-500:]
