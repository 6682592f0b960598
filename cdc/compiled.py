"""The processor's hot path compiled to C with mypyc, and how to tell whether it is.

The modules in ``HOT_PATH`` run once or more per record: per input event in the processor
(decode, state transaction, row and key codecs, change-event encoding, store apply, the Kafka
reader and writer, restore) and per record a replay's compaction task reads (the local log's
frames, the task's loop). ``make compiled`` (part of ``make venv``) builds them with mypyc, the
compiler of mypy that black and mypy itself ship with, from the same typed sources: the
extension modules land beside the ``.py`` files and Python imports them first. ``make pure``
removes them, and the same sources run as plain Python. Nothing here imports them.
"""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

HOT_PATH = (
    "cdc/json_bytes.py",
    "cdc/events/decimal_codec.py",
    "cdc/events/logical_types.py",
    "cdc/events/connect_schema.py",
    "cdc/events/writer.py",
    "cdc/state/changes.py",
    "cdc/state/key_codec.py",
    "cdc/state/row_codec.py",
    "cdc/state/table.py",
    "cdc/state/overlay.py",
    "cdc/state/transaction.py",
    "cdc/state/tables.py",
    "cdc/state/rocks_store.py",
    "cdc/connector/changelog.py",
    "cdc/streams/latest.py",
    "cdc/streams/kafka_reader.py",
    "cdc/streams/kafka_group.py",
    "cdc/streams/kafka_ends.py",
    "cdc/streams/kafka_writer.py",
    "cdc/streams/local/frames.py",
    "cdc/streams/local/cursor.py",
    "cdc/processor/events.py",
    "cdc/processor/processor.py",
    "cdc/processor/restore.py",
    "cdc/processor/group.py",
    "replay/decode/compacted_read.py",
    "replay/decode/survivor_rows.py",
    "replay/decode/task_survey.py",
)
"""Source files compiled by ``make compiled``, relative to the repository root."""

NATIVE = (
    "cdc/streams/local/native_frames.c",
)  # fmt: skip
"""C extension modules built beside them (``<stem>`` of the source is the module's name): code
whose speed needs what mypyc cannot give, each with a Python twin that runs where it is not built
and that tests hold it to."""

GROUPS = {package: f"{package}.hot_path" for package in ("cdc", "replay")}
"""mypyc's group of each package's modules: its shared library is ``<package>/hot_path__mypyc.*.so``
(a package's compiled code lives in its own directory)."""

_ROOT = Path(__file__).resolve().parent.parent


def _extensions_of(source: Path) -> list[Path]:
    """The extension modules beside ``source``, in the order Python's import tries them."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return [built for s in suffixes if (built := source.with_name(source.stem + s)).exists()]


def built_files(root: Path = _ROOT) -> list[Path]:
    """Every file of a build: the compiled modules and each group's shared library."""
    shared = [group.replace(".", "/") + "__mypyc.py" for group in GROUPS.values()]
    names = [*HOT_PATH, *NATIVE, *shared]
    return [built for name in names for built in _extensions_of(root / name)]


def compiled_modules(root: Path = _ROOT) -> list[str]:
    """The hot-path sources (``HOT_PATH`` and ``NATIVE``) that have a compiled module beside
    them."""
    return [name for name in (*HOT_PATH, *NATIVE) if _extensions_of(root / name)]


def stale_modules(root: Path = _ROOT) -> list[str]:
    """Hot-path sources edited after their compiled module was built: Python would run the old
    compiled code, so tests refuse to start and the CLI warns until ``make compiled`` (or
    ``make pure``) is run."""
    stale = []
    for name in (*HOT_PATH, *NATIVE):
        source = root / name
        built = _extensions_of(source)  # the first is the one imported
        if built and source.stat().st_mtime > built[0].stat().st_mtime:
            stale.append(name)
    return stale


def describe(root: Path = _ROOT) -> str:
    """One line for status output: compiled, partly compiled, or plain Python."""
    done = compiled_modules(root)
    if not done:
        return "hot path: plain Python (make compiled builds it with mypyc)"
    stale = stale_modules(root)
    state = f"{len(done)}/{len(HOT_PATH) + len(NATIVE)} modules compiled (mypyc and C)"
    return f"hot path: {state}" + (f"; stale, rebuild with make compiled: {stale}" if stale else "")
