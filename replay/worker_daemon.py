"""Spark's Python worker daemon in local mode (``spark.python.daemon.module``), whose pyspark
is the installed package's, compiled once, not Spark's zip of the same sources.

Spark puts its ``pyspark.zip`` and py4j's zip first on its workers' path. Python never caches
the compiled code of a module it imports from a zip, so every session's daemon compiled pyspark
from source before it forked its first worker: 0.78 s against 0.29 s (the daemon's imports on
an idle core; bench/README.md), paid by the first Python job of every session. In local mode the
wheel that holds that zip is the driver's own pyspark, installed beside it with its compiled
modules: the daemon moves Spark's archives to the end of its path (its workers, forked from it,
inherit the modules), then serves as ``replay.spark.serve_python_workers``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

SPARK_ARCHIVES = re.compile(r"(?:^|[/\\])(?:pyspark\.zip|py4j-[\w.-]+-src\.zip)$")
"""The archives Spark puts before a Python worker's own path."""


def installed_first(path: Sequence[str]) -> list[str]:
    """``path`` with Spark's archives (``SPARK_ARCHIVES``) moved after every other entry, the
    order otherwise kept."""
    return sorted(path, key=lambda entry: SPARK_ARCHIVES.search(entry) is not None)


def main() -> None:
    """Reorder this process's path, then import pyspark and serve Spark's workers."""
    sys.path[:] = installed_first(sys.path)
    from replay.spark import serve_python_workers

    serve_python_workers()


if __name__ == "__main__":
    main()
