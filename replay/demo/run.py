"""``replicator demo``: the seeds' scenario end to end, on embedded defaults.

1. generate payments and movie-ticket sales (with a few malformed payments);
2. run the event processor in a child process: payments counted per customer, tickets per title,
   every write captured on the changelog;
3. kill it with SIGKILL mid-stream, delete its local store, append the rest of the input, restart
   it: it restores from the changelog and finishes; the state is checked against a reference
   computed from the input (:mod:`replay.demo.crash_restore`);
4. replay the changelog on Spark (:mod:`replay.demo.replica_checks`).
Exit status 0 only if every check held.
"""

from __future__ import annotations

import shutil
import time

from rich.console import Console

from cdc.streams.registry import open_stream
from replay.demo.checks import Check, DemoSettings, report
from replay.demo.crash_restore import INPUTS, PROCESSOR_ID, crash_and_restore
from replay.demo.replica_checks import replay_and_verify


def run_demo(settings: DemoSettings, console: Console | None = None) -> int:
    """Run the whole demo; 0 if every check held."""
    console = console or Console()
    if settings.out_dir.exists():
        shutil.rmtree(settings.out_dir)
    settings.out_dir.mkdir(parents=True)
    stream = open_stream(settings.stream_url)
    leftovers = [t for t in stream.topics() if t in INPUTS or t.startswith(f"{PROCESSOR_ID}.")]
    if leftovers:
        stream.close()
        console.print(
            f"[red]demo:[/] {settings.stream_url} already holds topics of an earlier demo run "
            f"({', '.join(sorted(leftovers))}); the checks need fresh topics: delete them "
            "(kafka-topics.sh --delete) or use a fresh broker"
        )
        return 2
    checks: list[Check] = []
    started = time.monotonic()
    try:
        crash_and_restore(settings, stream, console, checks)
        replay_and_verify(settings, stream, console, checks)
    finally:
        stream.close()
    console.print(f"demo took {time.monotonic() - started:.1f}s; output in {settings.out_dir}")
    return report(checks, console)
