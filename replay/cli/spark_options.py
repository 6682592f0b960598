"""The Spark options of the commands that run on Spark (``replay``, ``verify``, ``project``):
``--master`` and ``--conf``, as spark-submit spells them."""

from __future__ import annotations

import argparse

from cdc.errors import UsageError


def add_spark_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--master`` and the repeatable ``--conf KEY=VALUE``."""
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE",
        help="a Spark setting of the session, e.g. spark.driver.memory=8g (repeatable); "
        "it overrides the replicator's own",
    )  # fmt: skip


def spark_settings(args: argparse.Namespace) -> dict[str, str]:
    """The ``--conf`` settings as a dict; a malformed one is a :class:`UsageError`."""
    settings: dict[str, str] = {}
    for text in args.conf:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {text!r}: expected KEY=VALUE, e.g. spark.driver.memory=8g")
        settings[key.strip()] = value
    return settings
