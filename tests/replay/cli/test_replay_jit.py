"""``replicator replay`` chooses its driver's JIT for the replay it runs: a small one that runs
once and exits gets C1 only on a small machine (``replay.driver_jit``); a plan only (or a
``--follow``) keeps the long-lived session's JIT. Checked on the JVM the command starts: its
final flags, printed by HotSpot on the command's standard output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replay.driver_jit import small_machine
from tests.replay.cli.test_user_errors import replicator
from tests.replay.tables.trial_changelog import Changelog, build_changelog, input_events

pytestmark = pytest.mark.integration

PRINT_FLAGS = {"REPLICATOR_JAVA_OPTIONS": "-XX:+PrintFlagsFinal"}


@pytest.fixture(scope="module")
def changelog(tmp_path_factory: pytest.TempPathFactory) -> Changelog:
    return build_changelog(
        f"local://{tmp_path_factory.mktemp('jit-log')}", "jit", input_events(60, seed=5)
    )


def _tiered_stop_level(stdout: str) -> int:
    found = re.search(r"^\s*\S+\s+TieredStopAtLevel\s+:?=\s+(\d+)", stdout, re.MULTILINE)
    assert found, stdout[-2000:]
    return int(found.group(1))


def test_a_small_replay_run_once_has_c1_only_on_a_small_machine(
    changelog: Changelog, tmp_path: Path
) -> None:
    done = replicator(
        "replay", "--stream", changelog.stream, "--topics", changelog.topic,
        "--sink", f"duckdb:///{tmp_path}/out.duckdb", cwd=tmp_path, env=PRINT_FLAGS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{changelog.topic} -> " in done.stdout  # the replay ran
    assert _tiered_stop_level(done.stdout) == (1 if small_machine() else 4)


def test_a_plan_only_keeps_the_long_lived_jit(changelog: Changelog, tmp_path: Path) -> None:
    done = replicator(
        "replay", "--stream", changelog.stream, "--topics", changelog.topic,
        "--sink", f"duckdb:///{tmp_path}/out.duckdb", "--dry-run", cwd=tmp_path, env=PRINT_FLAGS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _tiered_stop_level(done.stdout) == 4
