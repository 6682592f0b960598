"""The driver JVM's JIT options: C2 inlines less on a small machine, HotSpot's defaults elsewhere,
and a running session's JVM has what this machine calls for."""

from __future__ import annotations

import json
from typing import Any

from replay.driver_jit import (
    C2_EXCLUDED,
    ONE_SHOT_JIT,
    ONE_SHOT_MAX_RECORDS,
    QUICK_JIT,
    SMALL_MACHINE_CORES,
    compiler_directives,
    diagnostic_command,
    driver_jit_options,
    small_machine,
    usable_cores,
)

INLINING_LESS = {"InlineSmallCode": "1000", "FreqInlineSize": "100"}


def test_a_small_machine_inlines_less_and_a_large_one_keeps_the_defaults() -> None:
    assert driver_jit_options(2) == list(QUICK_JIT)
    assert driver_jit_options(SMALL_MACHINE_CORES) == list(QUICK_JIT)
    assert driver_jit_options(SMALL_MACHINE_CORES + 1) == []
    assert driver_jit_options() == driver_jit_options(usable_cores())
    assert usable_cores() >= 1


def test_a_small_replay_run_once_gets_c1_only_and_a_larger_or_long_lived_one_keeps_c2() -> None:
    assert driver_jit_options(2, one_shot_records=0) == list(ONE_SHOT_JIT)
    assert driver_jit_options(2, one_shot_records=ONE_SHOT_MAX_RECORDS) == list(ONE_SHOT_JIT)
    assert driver_jit_options(2, one_shot_records=ONE_SHOT_MAX_RECORDS + 1) == list(QUICK_JIT)
    assert driver_jit_options(2, one_shot_records=None) == list(QUICK_JIT)
    assert driver_jit_options(SMALL_MACHINE_CORES + 1, one_shot_records=10) == []


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


def test_the_directives_keep_only_c2_off_the_warm_up_packages() -> None:
    (directive,) = json.loads(compiler_directives())
    assert directive == {"match": [f"{p}*.*" for p in C2_EXCLUDED], "c2": {"Exclude": True}}


def test_the_sessions_compiler_has_the_directives_of_this_machine(spark: Any) -> None:
    context = spark.sparkContext
    listed = diagnostic_command(context._jvm, context._gateway, "compilerDirectivesPrint")
    excluded = [p for p in C2_EXCLUDED if f"{p}*.*" in listed]
    if small_machine():
        assert excluded == list(C2_EXCLUDED), listed
        # C2 excludes the methods the directive matches; C1 still compiles them
        c1, c2 = listed.split(" c2 directives:")[0], listed.split(" c2 directives:")[1]
        assert "Exclude:false" in c1.split(" c1 directives:")[1] and "Exclude:true" in c2
    else:
        assert excluded == [], listed
