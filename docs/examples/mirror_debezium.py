"""Mirror Debezium topics into DuckDB with the Python API.

The first run rebuilds one table per topic (named after the topic's last dotted part: the
topic ``dbserver1.public.accounts`` becomes the table ``accounts``); every later run merges only
what is new since the offsets the DuckDB file recorded with its data (its ledger). With
``--as-of-lsn`` it also builds a copy of every table as of a PostgreSQL LSN (inclusive, whole
source transactions only), next to the live tables, which it leaves alone.

    .venv/bin/python docs/examples/mirror_debezium.py 127.0.0.1:9092 'dbserver1\\.public\\..*' \\
        mirror.duckdb --as-of-lsn 0/16B3748
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cdc.streams.registry import open_stream
from replay.reading.bounds import Bound, BoundKind, parse_bound
from replay.sinks.registry import open_sink, sink_url
from replay.spark import spark_session
from replay.tables.engine import ReplayEngine, ReplayJob, target_table


def mirror(bootstrap: str, topics: str, duckdb_file: Path, as_of_lsn: str | None = None) -> None:
    """Bring the DuckDB mirror of ``topics`` (names or regex patterns, comma-separated) up to
    date; with ``as_of_lsn`` (``X/Y`` or decimal) also build ``<table>_as_of_<lsn>`` copies."""
    spark = spark_session()
    stream = open_stream(f"kafka://{bootstrap}")
    sink = open_sink(sink_url("duckdb", duckdb_file), spark)
    try:
        engine = ReplayEngine(spark, stream, sink)
        names = tuple(t for t in topics.split(",") if t)
        for result in engine.run(ReplayJob(names, start=Bound(BoundKind.LEDGER))):
            print(f"{result.topic} -> {result.table}: {result.mode}, {len(result.entries)} commits")
        if as_of_lsn is not None:
            stop = parse_bound(f"lsn:{as_of_lsn}", stop=True)
            suffix = as_of_lsn.replace("/", "_").lower()
            # one job for every table, so that a transaction over several tables stays whole
            into = {t: f"{target_table(t)}_as_of_{suffix}" for t in engine.plans(ReplayJob(names))}
            for result in engine.run(ReplayJob(tuple(into), stop=stop, into=into)):
                print(f"{result.topic} -> {result.table}: as of LSN {as_of_lsn}")
    finally:
        sink.close()
        stream.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bootstrap", help="Kafka bootstrap servers, e.g. 127.0.0.1:9092")
    parser.add_argument("topics", help="topic names or regex patterns, comma-separated")
    parser.add_argument("duckdb_file", type=Path, help="the DuckDB file of the mirror")
    parser.add_argument("--as-of-lsn", help="also build copies as of this LSN (X/Y or decimal)")
    args = parser.parse_args()
    mirror(args.bootstrap, args.topics, args.duckdb_file, args.as_of_lsn)
