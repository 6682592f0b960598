"""The Spark driver JVM's JIT on a small machine: C2's compilations made cheaper and fewer.

On two cores a session's first replay is mostly the JIT warming up. Its compiler threads worked
15-16 s (summed; ``profile_jobs`` prints it as ``jvm: JIT``) during a first 1 M rebuild of
12.6-13.3 s, and 20-23 s during a first 10 M one, on the cores the replay runs on. Three measures,
on a machine of at most ``SMALL_MACHINE_CORES`` cores (measured on two), where the compiler
threads have no cores of their own; elsewhere HotSpot's defaults stay (``bench/README.md``):

- C2 inlines less (``QUICK_JIT``; HotSpot's defaults on x86 are 2500 and 325): a first 1 M rebuild
  ~1.4 s (11 %) shorter, a first 10 M one ~0.9 s, a warm 10 M one ~1.2 s (4.5 %) longer.
- C2 leaves alone the code that is hot only while a session warms up (``C2_EXCLUDED``, through a
  HotSpot compiler directive, JEP 165; C1 still compiles it): C2 spent ~2.5 s of a first 1 M
  rebuild's ~10 s of compiler time on it, on the cores the tasks need; such a rebuild ~0.45 s
  (DuckDB) and ~0.55 s (Delta) shorter, 10 M rebuilds and ``--follow`` rounds no slower.
- A session that reads at most ``ONE_SHOT_MAX_RECORDS`` once and exits (``replay`` without
  ``--follow``) runs C1 only (``ONE_SHOT_JIT``): C2's code is faster once compiled, but such a
  session ends before that pays back the compiling on the tasks' cores. A first 1 M rebuild
  ~1.0 s (DuckDB) and ~1.7 s (Delta) shorter, a 2 M one as long; a second rebuild in the same
  session would be ~1 s (1 M) to ~2.5 s (2 M) longer, which a one-shot session never runs.

Only the driver: a cluster's executors run the hot loops and keep the defaults (in local mode the
driver is the executor). ``$REPLICATOR_JAVA_OPTIONS`` comes after these on the command line, and
wins.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from cdc.runtime import jars

QUICK_JIT = ("-XX:InlineSmallCode=1000", "-XX:FreqInlineSize=100")
"""C2 inlines callees of at most 1,000 bytes of compiled code and hot ones of at most 100 bytes
of bytecode."""
ONE_SHOT_JIT = ("-XX:TieredStopAtLevel=1",)
"""C1 only: no profiling tier, no C2."""
ONE_SHOT_MAX_RECORDS = 1_500_000
"""The most records a one-shot session reads for ``ONE_SHOT_JIT`` to pay (``bench/README.md``)."""
SMALL_MACHINE_CORES = 4
C2_EXCLUDED = (
    "org/apache/xbean/asm9/",  # Spark's closure cleaner reads class files
    "jdk/internal/org/objectweb/asm/",  # the JDK spins a class per lambda (Scala's: thousands)
    "org/codehaus/janino/",  # Spark's code generator compiles the generated Java
    "org/codehaus/commons/",
    "org/antlr/",  # Spark's SQL parser
)
"""Packages (class-name prefixes) C2 does not compile on a small machine: busy while a session
plans its first queries, idle in a replay's hot loops."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def small_machine(cores: int | None = None) -> bool:
    """Whether ``cores`` (default: ``usable_cores()``) leave the JIT no cores of its own."""
    return (usable_cores() if cores is None else cores) <= SMALL_MACHINE_CORES


def driver_jit_options(
    cores: int | None = None, *, one_shot_records: int | None = None
) -> list[str]:
    """The driver JVM's JIT options on a machine of ``cores`` (default: ``usable_cores()``), for
    a session that reads ``one_shot_records`` once and exits (None: a long-lived session)."""
    if not small_machine(cores):
        return []
    if one_shot_records is not None and one_shot_records <= ONE_SHOT_MAX_RECORDS:
        return list(ONE_SHOT_JIT)
    return list(QUICK_JIT)


def compiler_directives() -> str:
    """HotSpot compiler directives (JEP 165) that keep C2 off ``C2_EXCLUDED``."""
    return json.dumps([{"match": [f"{p}*.*" for p in C2_EXCLUDED], "c2": {"Exclude": True}}])


def diagnostic_command(jvm: Any, gateway: Any, operation: str, *arguments: str) -> str:
    """Run one of a JVM's diagnostic commands through py4j (``jcmd``'s, by the name of its MBean
    operation: ``compilerDirectivesAdd`` is ``Compiler.directives_add``); its answer."""
    lang = jvm.java.lang
    server = lang.management.ManagementFactory.getPlatformMBeanServer()
    commands = jvm.javax.management.ObjectName("com.sun.management:type=DiagnosticCommand")

    def array(kind: Any, *items: Any) -> Any:
        out = gateway.new_array(kind, len(items))
        for i, item in enumerate(items):
            out[i] = item
        return out

    # py4j cannot call the server's class (not public) directly: through its interface's method.
    names = ("javax.management.ObjectName", "java.lang.String", "[Ljava.lang.Object;",
             "[Ljava.lang.String;")  # fmt: skip
    invoke = lang.Class.forName("javax.management.MBeanServerConnection").getMethod(
        "invoke", array(lang.Class, *(lang.Class.forName(n) for n in names))
    )
    params = array(lang.Object, array(lang.String, *arguments))
    signature = array(lang.String, "[Ljava.lang.String;")
    call = array(lang.Object, commands, operation, params, signature)
    return str(invoke.invoke(server, call)).strip()


_directed: set[int] = set()


def keep_c2_off_warm_up_code(context: Any) -> None:
    """On a small machine, once per driver JVM (its py4j gateway): ``C2_EXCLUDED`` for the
    driver of ``context`` (a SparkContext), the directives file kept in the jar cache. A JVM
    without the command (not HotSpot) keeps its JIT as it is."""
    if not small_machine() or id(context._gateway) in _directed:
        return
    _directed.add(id(context._gateway))
    try:
        directives = jars.cache_file("jvm/jit-directives.json", compiler_directives())
        # At run time: -XX:CompilerDirectivesFile needs a diagnostic flag and prints to stdout.
        answer = diagnostic_command(
            context._jvm, context._gateway, "compilerDirectivesAdd", str(directives)
        )
    except Exception as error:  # a JIT choice, never a reason to fail a session
        answer = str(error).splitlines()[0] if str(error) else type(error).__name__
    logging.getLogger(__name__).debug("driver compiler directives: %s", answer)
