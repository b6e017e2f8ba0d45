"""The gateway's collector settings (gateway/cli/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gateway.cli import collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_collector")
def test_serving_freezes_what_exists_and_collects_the_young_less_often() -> None:
    # Given an object that exists before the gateway is built
    made_before = [object()]

    # When the collector is tuned for serving
    collector.tune_for_serving()

    # Then that object is out of every collection, and young objects wait for more allocations
    assert gc.get_freeze_count() > 0
    assert gc.is_tracked(made_before)
    young, middle, _ = gc.get_threshold()
    assert young == collector.YOUNG_THRESHOLD > 700
    assert middle == collector.MIDDLE_THRESHOLD


@pytest.mark.usefixtures("restored_collector")
def test_cycles_made_after_tuning_are_still_collected() -> None:
    # Given the collector tuned for serving
    collector.tune_for_serving()

    # When a reference cycle made afterwards becomes garbage
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle

    # Then a collection frees it (tuning delays collections, it does not stop them)
    assert gc.collect() >= 1
