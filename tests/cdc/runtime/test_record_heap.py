"""The cycle collector is paused inside the block only, and as it was after it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cdc.runtime.record_heap import cycle_collector_paused


@pytest.fixture
def collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


@pytest.mark.usefixtures("collector_restored")
def test_the_collector_is_paused_inside_and_enabled_after() -> None:
    gc.enable()
    with cycle_collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cycle_collector_paused():
        raise RuntimeError("a failed read")
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_restored")
def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with cycle_collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
