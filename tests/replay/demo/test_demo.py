"""The demo, at a small size, passes every check (it kills and restores a real processor)."""

from __future__ import annotations

from pathlib import Path

from replay.cli.main import main


def test_demo_passes_on_embedded_defaults(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--payments", "6000", "--customers", "300",
                 "--tickets", "2000"])  # fmt: skip
    assert code == 0
    assert (out / "state").is_dir() and (out / "log").is_dir()


def test_demo_passes_against_the_kafka_broker(tmp_path: Path, kafka_bootstrap: str) -> None:
    out = tmp_path / "demo-kafka"
    code = main(["demo", "--out", str(out), "--payments", "3000", "--customers", "200",
                 "--tickets", "1000", "--bootstrap-servers", kafka_bootstrap])  # fmt: skip
    assert code == 0
    assert (out / "state").is_dir() and not (out / "log").exists()
    # a second run on the same broker would mix its input with the first run's: it refuses
    again = main(["demo", "--out", str(tmp_path / "again"), "--payments", "10",
                  "--bootstrap-servers", kafka_bootstrap])  # fmt: skip
    assert again == 2
