"""The driver JVM's JIT options: C2 inlines less on a small machine, HotSpot's defaults elsewhere,
and a running session's JVM has what this machine calls for."""

from __future__ import annotations

from typing import Any

from replay.driver_jit import QUICK_JIT, SMALL_MACHINE_CORES, driver_jit_options, usable_cores

INLINING_LESS = {"InlineSmallCode": "1000", "FreqInlineSize": "100"}


def test_a_small_machine_inlines_less_and_a_large_one_keeps_the_defaults() -> None:
    assert driver_jit_options(2) == list(QUICK_JIT)
    assert driver_jit_options(SMALL_MACHINE_CORES) == list(QUICK_JIT)
    assert driver_jit_options(SMALL_MACHINE_CORES + 1) == []
    assert driver_jit_options() == driver_jit_options(usable_cores())
    assert usable_cores() >= 1


def test_the_sessions_jvm_runs_with_the_options_of_this_machine(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    factory = jvm.java.lang.management.ManagementFactory
    hotspot = factory.getPlatformMXBean(
        jvm.com.sun.management.HotSpotDiagnosticMXBean._java_lang_class
    )
    effective = {name: hotspot.getVMOption(name).getValue() for name in INLINING_LESS}
    if driver_jit_options():
        assert effective == INLINING_LESS
    else:  # HotSpot's own choice, whatever this JVM's defaults are
        assert effective != INLINING_LESS
