"""The ``replicator`` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from cdc import compiled
from cdc.errors import UserError, one_line
from cdc.runtime import class_archive, jars
from cdc.runtime.broker import LocalKafkaBroker
from cdc.runtime.broker import train_class_archive as train_broker_archive
from replay import class_archive as driver_archive

Handler = Callable[[argparse.Namespace], int]


def _cmd_jars(args: argparse.Namespace) -> int:
    for component in jars.COMPONENTS:
        if component == "spark-extras":
            from replay.spark import spark_jars

            found = spark_jars()
        else:
            found = jars.resolve(component)
        print(f"{component}: {len(found)} jars in {found[0].parent if found else '-'}")
    from replay.spark import driver_class_archive

    archive = driver_class_archive()
    if class_archive.enabled() and not archive.is_file():
        print("spark class archive: training it once (a small demo, about a minute)", flush=True)
    print(driver_archive.train(archive))
    print(train_broker_archive())
    print(compiled.describe())
    return 0


def _cmd_broker(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir) if args.data_dir else jars.cache_dir() / "kafka"
    broker = LocalKafkaBroker(data_dir, port=args.port, controller_port=args.controller_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    bootstrap = broker.start()
    print(f"Kafka broker ready: bootstrap servers {bootstrap} (log: {broker.log_file})", flush=True)
    print("Ctrl-C stops it.", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


def _cmd_process(args: argparse.Namespace) -> int:
    from replay.cli import process

    return process.run(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from replay.demo.checks import DemoSettings
    from replay.demo.run import run_demo

    out = Path(args.out).resolve()
    stream_url = (
        f"kafka://{args.bootstrap_servers}" if args.bootstrap_servers else f"local://{out}/log"
    )
    settings = DemoSettings(
        out_dir=out, stream_url=stream_url, payments=args.payments, customers=args.customers,
        tickets=args.tickets, seed=args.seed, spark_master=args.master,
    )  # fmt: skip
    return run_demo(settings)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="replicator",
        description="CDC-driven, event-sourced state replicator: state tables captured as "
        "Debezium change events, replayed on Spark into DuckDB and Delta Lake exactly-once.",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an error, not just its line, and the Kafka clients' log",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "jars",
        help="resolve the JVM jars (Kafka broker, Spark Kafka source, Delta) and train the "
        "class archives of the Spark driver and the broker (faster JVM starts)",
    )
    p.set_defaults(handler=_cmd_jars)

    p = sub.add_parser("broker", help="run a local single-node Kafka broker (KRaft) on 127.0.0.1")
    p.add_argument("--port", type=int, default=9092, help="client port (0: a free port)")
    p.add_argument("--controller-port", type=int, default=0, help="KRaft controller port")
    p.add_argument("--data-dir", help="storage and logs (default: <cache>/kafka)")
    p.set_defaults(handler=_cmd_broker)

    p = sub.add_parser("demo", help="the seeds' scenario end to end, on embedded defaults")
    p.add_argument("--out", default="demo-output", help="where the demo writes everything")
    p.add_argument("--bootstrap-servers", help="use this Kafka instead of the embedded local log")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--payments", type=int, default=100_000)
    p.add_argument("--customers", type=int, default=10_000)
    p.add_argument("--tickets", type=int, default=25_000)
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(handler=_cmd_demo)

    from replay.cli import process
    from replay.cli import replay as replay_cmd

    p = sub.add_parser("replay", help="rebuild or catch up tables from change topics on Spark")
    replay_cmd.add_replay_arguments(p)
    p.set_defaults(handler=lambda a: replay_cmd.run_replay(a))

    p = sub.add_parser("verify", help="compare two tables: counts, checksum, differing keys")
    replay_cmd.add_verify_arguments(p)
    p.set_defaults(handler=lambda a: replay_cmd.run_verify(a))

    from replay.cli import project

    p = sub.add_parser("project", help="maintain a SQL projection (read model) from a change topic")
    project.add_arguments(p)
    p.set_defaults(handler=lambda a: project.run(a))

    from replay.cli import query

    p = sub.add_parser("query", help="query a DuckDB read model, also while it is kept live")
    query.add_arguments(p)
    p.set_defaults(handler=lambda a: query.run(a))

    p = sub.add_parser("process", help="run an example processor over a stream until idle")
    process.add_arguments(p)
    p.set_defaults(handler=_cmd_process)

    from replay.cli import process_group

    p = sub.add_parser("owners", help="which member of a partitioned processor has which task")
    process_group.add_owners_arguments(p)
    p.set_defaults(handler=process_group.run_owners)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``replicator`` console script.

    A :class:`~cdc.errors.UserError` (bad input, data or environment) is one line on stderr and
    exit status 2; its traceback only with ``--debug``. Anything else is a bug: traceback, 1.
    """
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    # The Kafka clients' own log (cdc.streams.kafka_client.CLIENT_LOG): every failed connection
    # and refused login, which our errors and --follow's retries already say in one line.
    kafka_log = logging.getLogger("replicator.kafka")
    if args.debug:
        kafka_log.setLevel(logging.DEBUG)
        logging.basicConfig(stream=sys.stderr, format="%(name)s %(levelname)s: %(message)s")
    else:
        kafka_log.setLevel(logging.CRITICAL)
    stale = compiled.stale_modules()
    if stale:  # a checkout edited after `make compiled`: Python runs the old compiled code
        print(f"replicator: warning: {stale} changed since compiled; run `make compiled`",
              file=sys.stderr)  # fmt: skip
    try:
        return handler(args)
    except UserError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"replicator {args.command}: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
