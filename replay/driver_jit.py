"""The Spark driver JVM's JIT on a small machine: C2's compilations made cheaper by inlining less.

On two cores a session's first replay is mostly the JIT warming up. Its compiler threads worked
15-16 s (summed; ``profile_jobs`` prints it as ``jvm: JIT``) during a first 1 M rebuild of
12.6-13.3 s, and 20-23 s during a first 10 M one, on the cores the replay runs on. With C2
inlining less (``-XX:InlineSmallCode=1000 -XX:FreqInlineSize=100``; HotSpot's defaults on x86 are
2500 and 325) they worked 12-12.5 s and 14-15 s: a first 1 M rebuild ~1.4 s (11 %) shorter, a
first 10 M one ~0.9 s, warm 1 M rebuilds and ``--follow`` rounds unchanged, a warm 10 M rebuild
~1.2 s (4.5 %) longer: its hot loops run a little slower (``bench/README.md``).

Hence only on a machine of at most ``SMALL_MACHINE_CORES`` cores (measured on two), where the
compiler threads have no cores of their own; elsewhere HotSpot's defaults stay. Only the driver:
a cluster's executors run the hot loops and keep the defaults (in local mode the driver is the
executor). ``$REPLICATOR_JAVA_OPTIONS`` comes after these on the command line, and wins.
"""

from __future__ import annotations

import os

QUICK_JIT = ("-XX:InlineSmallCode=1000", "-XX:FreqInlineSize=100")
"""C2 inlines callees of at most 1,000 bytes of compiled code and hot ones of at most 100 bytes
of bytecode."""
SMALL_MACHINE_CORES = 4


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def driver_jit_options(cores: int | None = None) -> list[str]:
    """The driver JVM's JIT options on a machine of ``cores`` (default: ``usable_cores()``)."""
    count = usable_cores() if cores is None else cores
    return list(QUICK_JIT) if count <= SMALL_MACHINE_CORES else []
