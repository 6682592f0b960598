"""Parse throughput of published records (a measurement, not a test).

Run from the repository root: ``.venv/bin/python -m tests.cdc.events.parse_throughput``.
Each record is parsed ``--records`` times per run by one ``ChangeEventReader`` (the replay
engine's steady state: the schema is compiled once, then matched in place), and the best of
``--runs`` runs is reported, so that noise from other processes on the machine counts least.
For scale, the last column is the rate of the bare ``json.loads`` of the same bytes (floats,
no decoding, no validation), measured the same way.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from cdc.events import ChangeEventReader
from tests.cdc.events.conftest import PUBLISHED

RECORDS = (
    "pg_1x_create_with_schema.json",
    "pg_1x_update_schemaless.json",
    "sqlserver_1x_delete_decimal_base64_with_schema.json",
    "mysql_flinkcdc_alltypes_numeric_decimals_with_schema.json",
)


def best_rate(parse: Callable[[bytes, int], object], raw: bytes, records: int, runs: int) -> float:
    """Best rate over ``runs`` runs of ``parse(raw, offset)`` for ``records`` offsets."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        for offset in range(records):
            parse(raw, offset)
        best = min(best, time.perf_counter() - start)
    return records / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reader = ChangeEventReader()

    def parse(raw: bytes, offset: int) -> object:
        return reader.parse_value(raw, topic="t", partition=0, offset=offset)

    for name in RECORDS:
        raw = (PUBLISHED / name).read_bytes()
        rate = best_rate(parse, raw, args.records, args.runs)
        baseline = best_rate(lambda raw, _: json.loads(raw), raw, args.records, args.runs)
        print(
            f"{name:58s} {len(raw):6d} B {rate:9,.0f} events/s {1e6 / rate:6.1f} us/event"
            f"   json.loads: {baseline:9,.0f}/s"
        )


if __name__ == "__main__":
    main()
