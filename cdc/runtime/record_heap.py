"""Holding many records in Python: the cycle collector paused meanwhile, freed heap handed back.

A bulk read (a changelog restore, a rebuild's per-partition compaction) creates millions of
records (tuples: containers the cycle collector tracks), and keeps many of them. Every ~700 new
containers set off a young collection, and the survivors make the older generations' collections
walk every record held: in a compaction of 2 M records over 200 k keys the collector took more
than half of the CPU (3.6 against 1.6 us per record). Records make no reference cycles, so
nothing is left for the collector to find meanwhile; cycles other code makes are collected once
it is enabled again.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector inside the block (process-wide; restored after, also on
    an error, unless it was off before)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def return_free_heap() -> None:
    """Hand the C heap's free pages back to the OS (glibc's ``malloc_trim``; elsewhere nothing):
    values of a few hundred bytes live in the brk heap, which ``free`` alone does not shrink, so a
    reused worker process would keep a finished read's peak for the rest of its life."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, looked up once per process; None without glibc."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
