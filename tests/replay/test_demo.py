"""The demo, at a small size, passes every check (it kills and restores a real processor)."""

from __future__ import annotations

from pathlib import Path

from replay.cli import main


def test_demo_passes_on_embedded_defaults(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--payments", "6000", "--customers", "300",
                 "--tickets", "2000"])  # fmt: skip
    assert code == 0
    assert (out / "state").is_dir() and (out / "log").is_dir()
