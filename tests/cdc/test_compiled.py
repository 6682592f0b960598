"""The mypyc-compiled hot path: what is compiled, and edits after a build are caught."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
from pathlib import Path

import pytest

from cdc import compiled

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _tree(root: Path, built: dict[str, float]) -> None:
    """Every hot-path source at time 100; ``built`` names those with a module built at a time."""
    for name in compiled.HOT_PATH:
        source = root / name
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("")
        os.utime(source, (100, 100))
        if name in built:
            module = source.with_name(source.stem + SUFFIX)
            module.write_bytes(b"")
            os.utime(module, (built[name], built[name]))


def test_a_source_edited_after_its_build_is_stale(tmp_path: Path) -> None:
    first, second = compiled.HOT_PATH[:2]
    _tree(tmp_path, {first: 200, second: 50})
    assert compiled.compiled_modules(tmp_path) == [first, second]
    assert compiled.stale_modules(tmp_path) == [second]
    assert "stale" in compiled.describe(tmp_path) and second in compiled.describe(tmp_path)


def test_plain_python_is_never_stale(tmp_path: Path) -> None:
    _tree(tmp_path, {})
    assert compiled.stale_modules(tmp_path) == []
    assert compiled.describe(tmp_path).startswith("hot path: plain Python")


@pytest.mark.skipif(
    not compiled.compiled_modules() or os.environ.get("CDC_PURE_PYTHON") == "1",
    reason="the hot path is not compiled in this checkout (CDC_PURE_PYTHON=1 or no make compiled)",
)
def test_the_whole_hot_path_is_compiled_and_imported_as_such() -> None:
    assert compiled.compiled_modules() == [*compiled.HOT_PATH, *compiled.NATIVE]
    for name in (*compiled.HOT_PATH, *compiled.NATIVE):
        module = importlib.import_module(name.rsplit(".", 1)[0].replace("/", "."))
        assert module.__file__ is not None and module.__file__.endswith(SUFFIX), name


def test_the_makefile_reads_every_hot_path_module_as_a_prerequisite() -> None:
    """``make compiled`` rebuilds when a listed source changes: the Makefile takes the list out
    of ``cdc/compiled.py`` with a sed pattern, one quoted path per line."""
    source = (Path(__file__).resolve().parents[2] / "cdc" / "compiled.py").read_text()
    listed = re.findall(r'^    "([a-z_/]*\.py)",$', source, flags=re.MULTILINE)
    assert listed == list(compiled.HOT_PATH)
