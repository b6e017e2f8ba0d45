"""The ready set of a partition: an ordered set of offsets, whatever the order of changes."""

from __future__ import annotations

import random

import pytest

from lease_store import ready_set
from lease_store.ready_set import ReadySet


def _agrees(ready: ReadySet, model: set[int]) -> None:
    ordered = sorted(model)
    assert list(ready) == ordered
    assert len(ready) == len(model)
    assert bool(ready) == bool(model)
    for limit in (0, 1, 3, 10, len(model) + 1):
        assert ready.first(limit) == ordered[:limit]


def test_offsets_are_read_lowest_first_however_they_were_added() -> None:
    ready = ReadySet([7, 3])
    for offset in (10, 11, 5, 1, 12):
        ready.add(offset)
    assert list(ready) == [1, 3, 5, 7, 10, 11, 12]
    assert ready.first(4) == [1, 3, 5, 7]
    assert 5 in ready and 12 in ready and 4 not in ready


def test_taking_the_lowest_in_turn_leaves_the_rest_in_order() -> None:
    # The common case: messages ingested (added above all) and received (lowest removed)
    ready = ReadySet()
    for offset in range(100):
        ready.add(offset)
    for offset in range(60):
        assert ready.first(1) == [offset]
        ready.discard(offset)
    assert ready.first(5) == [60, 61, 62, 63, 64]
    assert len(ready) == 40


def test_an_offset_removed_from_the_middle_and_added_again_is_in_its_place() -> None:
    # A message deleted while visible, another leased and its lease ended
    ready = ReadySet(range(10))
    ready.discard(4)
    ready.discard(6)
    assert 4 not in ready and list(ready) == [0, 1, 2, 3, 5, 7, 8, 9]
    ready.add(4)
    assert list(ready) == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    for offset in (0, 1, 2, 3):
        ready.discard(offset)
    assert ready.first(3) == [4, 5, 7]


def test_removing_what_is_not_there_changes_nothing() -> None:
    ready = ReadySet([1, 2, 3])
    ready.discard(9)
    ready.discard(0)
    ready.discard(2)
    ready.discard(2)
    assert list(ready) == [1, 3] and len(ready) == 2


def test_the_run_is_cut_and_compacted_without_losing_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With a small threshold, long sequences cross every cut and compaction
    monkeypatch.setattr(ready_set, "_CUT_AFTER", 4)
    ready, model = ReadySet(), set()
    for offset in range(0, 400, 2):
        ready.add(offset)
        model.add(offset)
    for offset in range(100, 300, 4):  # from the middle: marked, then compacted
        ready.discard(offset)
        model.discard(offset)
    _agrees(ready, model)
    for offset in sorted(model)[:50]:  # from the front: the head moves, the run is cut
        ready.discard(offset)
        model.discard(offset)
    _agrees(ready, model)
    for offset in (1, 101, 399, 500):
        ready.add(offset)
        model.add(offset)
    _agrees(ready, model)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("cut_after", [2, 4096])
def test_random_changes_keep_it_an_ordered_set(
    seed: int, cut_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ready_set, "_CUT_AFTER", cut_after)
    rng = random.Random(seed)
    initial = set(rng.sample(range(200), 30))
    ready, model = ReadySet(initial), set(initial)
    next_offset = 200
    for _ in range(2000):
        choice = rng.random()
        if choice < 0.35:  # ingest: above everything
            ready.add(next_offset)
            model.add(next_offset)
            next_offset += 1
        elif choice < 0.65 and model:  # receive: the lowest
            lowest = min(model)
            ready.discard(lowest)
            model.discard(lowest)
        elif choice < 0.8:  # an offset back (a lease ended), if it is not here
            offset = rng.randrange(next_offset)
            if offset not in model:
                ready.add(offset)
                model.add(offset)
        else:  # any offset removed, here or not
            offset = rng.randrange(next_offset + 1)
            ready.discard(offset)
            model.discard(offset)
        probe = rng.randrange(next_offset + 1)
        assert (probe in ready) == (probe in model)
        assert len(ready) == len(model)
        if rng.random() < 0.05:
            _agrees(ready, model)
    _agrees(ready, model)
