"""Builds the processor's hot path (``cdc.compiled.HOT_PATH``) with mypyc, in place.

    .venv/bin/python scripts/compile_hot_path.py          # build (what `make compiled` runs)
    .venv/bin/python scripts/compile_hot_path.py --clean  # remove the built modules (`make pure`)

mypyc type-checks the modules with the project's mypy settings (pyproject.toml), writes C into
``build/mypyc`` and the extension modules beside the sources; the C modules of
``cdc.compiled.NATIVE`` are built beside them. It needs a C compiler, the Python headers and
zlib's (``scripts/bootstrap-system.sh compiler`` installs them on Debian).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cdc.compiled import GROUPS, HOT_PATH, NATIVE, built_files  # noqa: E402


def main(argv: list[str]) -> int:
    for path in built_files(ROOT):
        path.unlink()
    if argv == ["--clean"]:
        print("hot path: plain Python (compiled modules removed)")
        return 0
    os.chdir(ROOT)  # mypyc reads the mypy settings of pyproject.toml from here
    from mypyc.build import mypycify
    from setuptools import Extension, setup

    build = ROOT / "build" / "mypyc"
    try:
        groups = [([n for n in HOT_PATH if n.startswith(f"{package}/")], group)
                  for package, group in GROUPS.items()]  # fmt: skip
        modules = mypycify(list(HOT_PATH), separate=groups, opt_level="3", target_dir=str(build))
        modules += [Extension(name.removesuffix(".c").replace("/", "."), [name], libraries=["z"],
                              extra_compile_args=["-O3"]) for name in NATIVE]  # fmt: skip
        temp = str(build / "temp")
        setup(name="cdc-replicator-hot-path", ext_modules=modules,
              script_args=["-q", "build_ext", "--inplace", "--build-temp", temp])  # fmt: skip
    except (Exception, SystemExit) as exc:  # distutils reports compiler failures as SystemExit
        hint = ("install a C compiler and the Python headers (scripts/bootstrap-system.sh "
                "compiler), or run on plain Python with CDC_PURE_PYTHON=1")  # fmt: skip
        print(f"compiling the hot path with mypyc failed: {exc}\n{hint}", file=sys.stderr)
        for path in built_files(ROOT):
            path.unlink()
        return 1
    for path in built_files(ROOT):  # setuptools keeps the time of a shim it did not rebuild
        path.touch()
    print(f"hot path: {len(HOT_PATH)} modules compiled with mypyc, {len(NATIVE)} in C")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
