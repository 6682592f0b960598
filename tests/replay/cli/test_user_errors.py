"""Bad input on the command line is one line on stderr naming what was wrong, exit status 2, no
traceback (``--debug`` shows it), and leaves nothing behind; a real bug keeps its traceback.

The commands run as a user runs them (``python -m replay.cli.main`` in a subprocess), so what is
checked is exactly what reaches the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay.cli import replay as replay_cmd
from replay.cli.main import build_parser, main
from replay.cli.spark_options import spark_settings
from replay.sinks import duckdb_files

ROOT = Path(__file__).resolve().parents[3]


def replicator(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``replicator`` command line in a fresh interpreter (``env``: added variables)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "replay.cli.main", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _assert_one_line(done: subprocess.CompletedProcess[str], command: str, names: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"replicator {command}: "), lines[0]
    assert names in lines[0], lines[0]
    assert done.stdout == ""


# (arguments with {d} for the scratch directory, the command, what the message must name)
CASES = [
    ("replay --stream bogus://x --sink duckdb://{d}/out.duckdb --topics t", "replay", "bogus://x"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics t --until garbage",
     "replay", "'garbage'"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics t --until ts:soon",
     "replay", "'ts:soon'"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics t --from latest",
     "replay", "'latest' is not a start bound"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics shop.orders",
     "replay", "topic 'shop.orders' does not exist"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics shop\\..*",
     "replay", "no topic matches the pattern"),
    ("replay --stream local://{d}/log --sink sqlite://{d}/x --topics t", "replay", "sqlite://"),
    ("replay --stream local://{d}/log --sink duckdb://relative.duckdb --topics t", "replay",
     "duckdb:///absolute/path"),
    ("replay --stream kafka:// --sink duckdb://{d}/out.duckdb --topics t", "replay", "kafka://"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics a,b --into c",
     "replay", "--into c takes exactly one topic"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics t --follow "
     "--until t:0:5", "replay", "--follow keeps applying new events"),
    ("replay --stream local://{d}/log?bogus_setting=1 --sink duckdb://{d}/o.duckdb --topics t",
     "replay", "bogus_setting"),
    ("verify duckdb://{d}/missing.duckdb#t delta://{d}/lake#t --key id", "verify",
     "missing.duckdb"),
    ("verify delta://{d}/lake#t delta://{d}/lake#u --key id", "verify", "no Delta table t"),
    ("verify duckdb://{d}/missing.duckdb delta://{d}/lake#t --key id", "verify", "names no table"),
    ("project --stream local://{d}/log --sink duckdb://{d}/o.duckdb --sql-file {d}/nope.sql",
     "project", "nope.sql"),
    ("project --stream local://{d}/log --sink duckdb://{d}/o.duckdb --sql SELECT", "project",
     "a projection needs a name"),
    ("replay --stream local://{d}/log --sink duckdb://{d}/out.duckdb --topics t --conf x",
     "replay", "--conf 'x': expected KEY=VALUE"),
    ("project --stream local://{d}/log --sink duckdb://{d}/o.duckdb --conf =1 --sql SELECT",
     "project", "--conf '=1': expected KEY=VALUE"),
    ("project --stream local://{d}/log --sink duckdb://{d}/o.duckdb --topic x --sql "
     "CREATE TABLE p AS SELECT title, count(*) AS n FROM sales GROUP BY title", "project",
     "--topic x"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "command", "names"), CASES, ids=[c[2] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(
    tmp_path: Path, args: str, command: str, names: str
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = args.format(d=scratch)
    split = argv.split(" --sql ", 1)
    words = split[0].split() + (["--sql", split[1]] if len(split) > 1 else [])
    done = replicator(*words, cwd=tmp_path)
    _assert_one_line(done, command, names)
    assert list(scratch.iterdir()) == [], "a command that failed on its input left files behind"


def test_verify_names_a_table_missing_from_an_existing_database(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    duckdb_files.connect(db, read_only=False, timeout_s=5).close()  # an empty database
    done = replicator("verify", f"duckdb://{db}#orders", f"duckdb://{db}#orders", "--key", "id",
                      cwd=tmp_path)  # fmt: skip
    _assert_one_line(done, "verify", f"no table orders in duckdb://{db}")


def test_debug_shows_the_traceback_of_a_user_error(tmp_path: Path) -> None:
    done = replicator("--debug", "replay", "--stream", "bogus://x", "--sink",
                      f"duckdb://{tmp_path}/o.duckdb", "--topics", "t", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("replicator replay: unknown event")


def test_a_bug_is_not_dressed_up_as_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: object) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(replay_cmd, "run_replay", broken)
    with pytest.raises(KeyError, match="a bug"):
        main(["replay", "--stream", "local:///x", "--sink", "duckdb:///x", "--topics", "t"])


@pytest.mark.integration
def test_a_missing_kafka_topic_is_one_line(kafka_bootstrap: str, tmp_path: Path) -> None:
    done = replicator("replay", "--stream", f"kafka://{kafka_bootstrap}", "--sink",
                      f"duckdb://{tmp_path}/o.duckdb", "--topics", "no.such.topic",
                      cwd=tmp_path)  # fmt: skip
    _assert_one_line(done, "replay", "topic 'no.such.topic' does not exist")
    assert not (tmp_path / "o.duckdb").exists()


def test_spark_settings_of_the_command_line_reach_the_session_settings() -> None:
    """``--conf KEY=VALUE`` (repeatable; a value may hold ``=``) becomes the session's settings."""
    args = build_parser().parse_args(
        ["replay", "--stream", "local:///x", "--sink", "duckdb:///x.duckdb", "--topics", "t",
         "--conf", "spark.driver.memory=8g", "--conf", "spark.x.opts=-Da=b"]
    )  # fmt: skip
    assert spark_settings(args) == {"spark.driver.memory": "8g", "spark.x.opts": "-Da=b"}
