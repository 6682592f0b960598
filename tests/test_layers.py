"""The architecture holds: ``cdc`` <- ``projections`` <- ``replay``, ``replay``'s subpackages in
layers, each heavy dependency imported by one module only, modules within 300 lines
(docs/CONTRIBUTING.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGES = ("cdc", "projections", "replay")
REPLAY_LAYERS = (
    {"class_archive", "driver_jit"},
    {"jvm_options"},
    {"spark", "progress"},
    {"expression_cache", "driver_frames", "worker_daemon"},
    {"reading", "sinks", "verify"},
    {"decode"},
    {"tables"},
    {"projection"},
    {"demo"},
    {"cli"},
)
"""Lowest first; a part may import its own layer's modules only within itself."""
HEAVY = {
    "pyspark": "replay/spark.py",
    "delta": "replay/sinks/delta_sink.py",
    "duckdb": "replay/sinks/duckdb_files.py",
    "confluent_kafka": "cdc/streams/kafka_client.py",
    "rocksdict": "cdc/state/rocks_store.py",
}


def _imports() -> dict[Path, set[str]]:
    found: dict[Path, set[str]] = defaultdict(set)
    for package in PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found[path.relative_to(REPO_ROOT)].add(node.module)
                    if node.module in PACKAGES:  # ``from replay import spark``: its modules
                        found[path.relative_to(REPO_ROOT)].update(
                            f"{node.module}.{a.name}"
                            for a in node.names
                            if (REPO_ROOT / node.module / f"{a.name}.py").is_file()
                            or (REPO_ROOT / node.module / a.name).is_dir()
                        )
                elif isinstance(node, ast.Import):
                    found[path.relative_to(REPO_ROOT)].update(a.name for a in node.names)
    return found


def test_packages_import_one_way() -> None:
    upward = [
        f"{path} imports {module}"
        for path, modules in _imports().items()
        for module in modules
        if module.split(".")[0] in PACKAGES
        and PACKAGES.index(module.split(".")[0]) > PACKAGES.index(path.parts[0])
    ]
    assert upward == []


def test_replay_parts_import_only_lower_layers() -> None:
    layer = {part: i for i, parts in enumerate(REPLAY_LAYERS) for part in parts}
    wrong = []
    for path, modules in _imports().items():
        if path.parts[0] != "replay" or (path.name == "__init__.py" and len(path.parts) == 2):
            continue
        own = path.parts[1] if len(path.parts) > 2 else path.stem
        for module in modules:
            parts = module.split(".")
            if parts[0] != "replay" or len(parts) < 2 or parts[1] == own:
                continue
            if layer[parts[1]] >= layer[own]:
                wrong.append(f"{path} ({own}) imports {module}")
    assert wrong == []


def test_each_heavy_dependency_has_one_importing_module() -> None:
    importers: dict[str, set[str]] = defaultdict(set)
    for path, modules in _imports().items():
        for module in modules:
            if module.split(".")[0] in HEAVY:
                importers[module.split(".")[0]].add(str(path))
    assert {name: sorted(paths) for name, paths in importers.items()} == {
        name: [path] for name, path in HEAVY.items()
    }


MAX_MODULE_LINES = 300


def test_modules_stay_within_300_lines() -> None:
    """Modules are split by responsibility before they grow past 300 lines (the package code,
    the tests and the benchmarks alike)."""
    long = {
        str(path.relative_to(REPO_ROOT)): lines
        for part in (*PACKAGES, "tests", "bench")
        for path in (REPO_ROOT / part).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
