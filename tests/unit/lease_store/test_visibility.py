"""The in-memory visibility of one partition (`lease_store/visibility.py`), on its own."""

from __future__ import annotations

from lease_store.visibility import PartitionVisibility


def counts(vis: PartitionVisibility) -> tuple[int, int, int]:
    return vis.visible, vis.in_flight, vis.delayed


def test_built_from_facts_it_sorts_messages_by_the_sweep_point_and_receive_count() -> None:
    # Given offset 0 visible, 1 in flight until 200, 2 delayed until 150, 3 visible
    facts = [(0, 50, 0), (1, 200, 1), (2, 150, 0), (3, 100, 2)]

    # When
    vis = PartitionVisibility.from_facts(facts, swept_until_ms=100)

    # Then
    assert counts(vis) == (2, 1, 1)
    assert vis.first_ready(10) == [0, 3]
    assert vis.next_due_ms() == 150


def test_a_sweep_makes_due_messages_visible_oldest_offset_first() -> None:
    # Given offsets 5 and 6 visible, and offset 1 leased until 120
    vis = PartitionVisibility()
    vis.add(5, 0, received=False, swept_until_ms=100)
    vis.add(6, 0, received=False, swept_until_ms=100)
    vis.add(1, 120, received=True, swept_until_ms=100)

    # When its lease ends
    assert vis.sweep(119) == 0
    moved = vis.sweep(120)

    # Then it comes before the newer messages
    assert moved == 1
    assert vis.first_ready(2) == [1, 5]
    assert counts(vis) == (3, 0, 0)
    assert vis.next_due_ms() is None


def test_the_next_due_time_skips_leases_that_were_ended_or_replaced() -> None:
    # Given three leases, of which the earliest was deleted and the next extended
    vis = PartitionVisibility()
    for offset, at_ms in ((0, 110), (1, 120), (2, 130)):
        vis.add(offset, at_ms, received=True, swept_until_ms=100)
    vis.remove(0)
    vis.remove(1)
    vis.add(1, 140, received=True, swept_until_ms=100)

    # Then
    assert vis.next_due_ms() == 130
    assert vis.sweep(135) == 1
    assert vis.first_ready(5) == [2]
    assert counts(vis) == (1, 1, 0)


def test_a_message_leased_again_with_the_same_deadline_is_swept_once() -> None:
    vis = PartitionVisibility()
    vis.add(7, 110, received=True, swept_until_ms=100)
    vis.remove(7)
    vis.add(7, 110, received=True, swept_until_ms=100)

    assert vis.sweep(110) == 1
    assert vis.first_ready(5) == [7]
    assert counts(vis) == (1, 0, 0)


def test_removing_a_visible_message_and_one_never_seen_is_safe() -> None:
    vis = PartitionVisibility()
    vis.add(3, 0, received=False, swept_until_ms=100)
    vis.remove(3)
    vis.remove(99)
    assert counts(vis) == (0, 0, 0)


def test_leases_ended_early_do_not_pile_up_in_memory() -> None:
    # Given a drain: every message leased for 12 hours and deleted at once, 100,000 times
    vis = PartitionVisibility()
    for offset in range(100_000):
        vis.add(offset, 12 * 3600 * 1000, received=True, swept_until_ms=0)
        vis.remove(offset)

    # Then the stale deadlines were dropped along the way (the heap is private; its size is
    # what this test is about)
    assert len(vis._due) <= 1024
    assert vis.next_due_ms() is None
    assert counts(vis) == (0, 0, 0)


def test_it_knows_which_ready_messages_were_received_before() -> None:
    # Given a store's facts: 0 never received, 1 received and visible again, 2 in flight
    vis = PartitionVisibility.from_facts([(0, 50, 0), (1, 60, 1), (2, 200, 1)], 100)
    assert [vis.was_received(o) for o in (0, 1)] == [False, True]

    # When 0 is received, and 2's lease ends
    vis.remove(0)
    vis.add(0, 300, received=True, swept_until_ms=100)
    vis.sweep(300)

    # Then both are ready as received before; a never-received message added ready is not;
    # and a removed message is forgotten
    assert vis.first_ready(10) == [0, 1, 2]
    assert [vis.was_received(o) for o in (0, 1, 2)] == [True, True, True]
    vis.add(7, 0, received=False, swept_until_ms=300)
    assert not vis.was_received(7)
    vis.remove(1)
    assert not vis.was_received(1)


def test_a_delayed_message_that_becomes_visible_was_never_received() -> None:
    vis = PartitionVisibility()
    vis.add(3, 150, received=False, swept_until_ms=100)
    vis.sweep(150)
    assert vis.first_ready(1) == [3]
    assert not vis.was_received(3)
