"""Spark's Python workers import the installed pyspark, not Spark's zip of it
(``replay.worker_daemon``)."""

from __future__ import annotations

from typing import Any

import pyspark
import pytest

from replay.worker_daemon import installed_first


def test_installed_first_moves_only_sparks_archives_last() -> None:
    path = [
        "/spark/python/lib/pyspark.zip",
        "/spark/python/lib/py4j-0.10.9.9-src.zip",
        "/work",
        "/venv/site-packages",
        "/user/own-pyspark.zip.d",
        "/user/deps.zip",
    ]
    assert installed_first(path) == [
        "/work",
        "/venv/site-packages",
        "/user/own-pyspark.zip.d",
        "/user/deps.zip",
        "/spark/python/lib/pyspark.zip",
        "/spark/python/lib/py4j-0.10.9.9-src.zip",
    ]


def _worker_modules(_rows: Any) -> list[tuple[str, str | None]]:
    import sys

    import py4j  # type: ignore[import-untyped]

    main = sys.modules["__main__"].__spec__
    return [(pyspark.__file__ or "", py4j.__file__), (main.name if main else "", None)]


@pytest.mark.integration
def test_workers_run_the_daemon_with_the_installed_pyspark(spark: Any) -> None:
    """The daemon is ``replay.worker_daemon``; its workers' pyspark and py4j are the driver's
    installed (compiled) packages, not modules of Spark's zips."""
    import py4j

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(_worker_modules).collect()
    assert found == [(pyspark.__file__, py4j.__file__), ("replay.worker_daemon", None)]
    assert ".zip" not in str(pyspark.__file__) and ".zip" not in str(py4j.__file__)
