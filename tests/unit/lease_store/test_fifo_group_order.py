"""FIFO group availability and group order (`lease_store/fifo_groups.py`), pure and in the store.

The store tests replay, on a `ManualClock` and every backend, the sequences AWS answered in
LocalStack's AWS-validated tests (`tests/aws/services/sqs/test_sqs.py`,
`test_fifo_receive_message_with_zero_visibility_timeout`,
`..._visibility_timeout_shared_in_group`, `test_fifo_message_group_visibility_after_*`,
`test_fifo_receive_message_group_id_ordering`): a group is available while its oldest message
is visible, gives its messages up to the first one in flight, and groups are served in the
order they became available.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lease_store import fifo, fifo_groups
from lease_store.clock import ManualClock
from lease_store.fifo_groups import GroupRun
from lease_store.records import LeaseFact, StoredMessage
from lease_store.store import LeaseStore
from tests.support.builders import SECOND_MS, T0, a_message, a_partition, on_every_backend

RETENTION_MS = 4 * 24 * 3600 * SECOND_MS
VISIBILITY_MS = 30 * SECOND_MS
PK = a_partition()


# -- the pure rules ------------------------------------------------------------------------------


def a_fact(visible_at_ms: int, receive_count: int = 0) -> LeaseFact:
    return LeaseFact(sent_ms=T0, visible_at_ms=visible_at_ms, receive_count=receive_count)


def test_a_message_never_received_is_available_since_its_send_and_before_a_returned_one() -> None:
    new = fifo_groups.available_since(7, a_fact(T0 + 5))
    returned = fifo_groups.available_since(3, a_fact(T0 + 5, receive_count=1))
    assert new == (T0 + 5, 0, 7)
    assert new < returned  # the same millisecond: the one never received first


def test_a_group_gives_its_visible_messages_up_to_the_first_hidden_one() -> None:
    # Given a group whose message at offset 5 is in flight
    run = GroupRun("g", hidden=[5, 9])
    # When its visible messages are offered in log order
    offered = [run.offer(2), run.offer(4), run.offer(6), run.offer(10)]
    # Then those before 5 may be taken, the others are hidden with it
    assert offered == [True, True, False, False]
    assert run.offsets == [2, 4] and run.available


def test_a_group_whose_oldest_message_is_hidden_is_not_available() -> None:
    run = GroupRun("g", hidden=[3])
    assert [run.offer(4), run.offer(2)] == [False, False]
    assert not run.available
    assert fifo_groups.head_hidden(3, 4)
    assert not fifo_groups.head_hidden(5, 4)
    assert not fifo_groups.head_hidden(None, 4)


def since_from(facts: dict[int, LeaseFact]) -> fifo_groups.SinceOf:
    return lambda offset: fifo_groups.available_since(offset, facts[offset])


def test_groups_of_messages_never_received_are_served_in_log_order_without_reading_facts() -> None:
    runs = [GroupRun("b", offsets=[4]), GroupRun("a", offsets=[1, 2]), GroupRun("c", hidden=[0])]

    def no_fact(offset: int) -> fifo_groups.AvailableSince:
        raise AssertionError(f"read the fact of {offset}")

    assert [run.group for run in fifo_groups.serving_order(runs, no_fact)] == ["a", "b"]


def test_groups_are_served_in_the_order_they_became_available() -> None:
    # Given a group returned from flight at T0+9, one waiting since T0+3, one hidden
    returned = GroupRun("a", offsets=[0, 1], returned=True)
    waiting = GroupRun("b", offsets=[2])
    hidden = GroupRun("c", hidden=[3], blocked=True)
    facts = {0: a_fact(T0 + 9, receive_count=1), 2: a_fact(T0 + 3)}
    # Then the waiting group comes first and the hidden one not at all
    order = fifo_groups.serving_order([returned, waiting, hidden], since_from(facts))
    assert [run.group for run in order] == ["b", "a"]


def test_only_groups_available_before_the_frontier_are_settled() -> None:
    early = GroupRun("a", offsets=[0, 1])
    late = GroupRun("b", offsets=[2], returned=True)
    facts = {0: a_fact(T0), 2: a_fact(T0 + 9, receive_count=1)}
    since_of = since_from(facts)
    assert fifo_groups.settled_count([early, late], (T0 + 1, 0, 5), since_of) == 2
    assert fifo_groups.settled_count([early, late], (T0 + 9, 1, 2), since_of) == 3


# -- the store, replaying what AWS answered ------------------------------------------------------


def sent(*bodies: str, step_ms: int = 1) -> list[tuple[int, StoredMessage]]:
    """Records at offsets 0.., sent `step_ms` apart from a minute before T0 (the clock's
    start), `g<k>-m<n>` in group `g<k>`."""
    out = []
    for offset, body in enumerate(bodies):
        group = body.split("-")[0]
        sent_ms = T0 - 60 * SECOND_MS + offset * step_ms
        message = a_message(body, body=body.encode(), sent_ms=sent_ms, message_group_id=group)
        out.append(
            (
                offset,
                replace(message, deduplication_id=body, deduplication_scope=fifo.SCOPE_QUEUE),
            )
        )
    return out


def receive(
    store: LeaseStore, clock: ManualClock, max_messages: int, visibility_ms: int = VISIBILITY_MS
) -> list[str]:
    clock.advance(1)
    outcome = store.receive_fifo(PK, clock.now_ms(), max_messages, visibility_ms, RETENTION_MS)
    return [d.message.message_id for d in outcome.delivered]


def offset_of(body: str, log: list[tuple[int, StoredMessage]]) -> int:
    return next(offset for offset, message in log if message.message_id == body)


@on_every_backend
def test_visibility_zero_receives_leave_groups_available_and_send_them_to_the_back(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given g1-m1, g2-m1, g2-m2, g3-m1, g1-m2 sent in that order
    store.ingest(PK, sent("g1-m1", "g2-m1", "g2-m2", "g3-m1", "g1-m2"))
    # When received 3 with VisibilityTimeout 0, then 10
    first = receive(store, clock, 3, visibility_ms=0)
    second = receive(store, clock, 10, visibility_ms=0)
    # Then as AWS: g1 whole and g2's first; then g3 (waiting since its send) before the others
    assert first == ["g1-m1", "g1-m2", "g2-m1"]
    assert second == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


@on_every_backend
def test_groups_returning_from_flight_queue_behind_groups_already_waiting(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given g1 x4, g2, g3; two of g1 received with a 1 s lease, then g2's
    store.ingest(PK, sent("g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1", "g3-m1"))
    assert receive(store, clock, 2, visibility_ms=SECOND_MS) == ["g1-m1", "g1-m2"]
    assert receive(store, clock, 1, visibility_ms=SECOND_MS) == ["g2-m1"]
    # When the leases end and 10 are received
    clock.advance(2 * SECOND_MS)
    again = receive(store, clock, 10, visibility_ms=0)
    # Then g3 first (waiting all along), then g1 (back first), then g2
    assert again == ["g3-m1", "g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1"]


@on_every_backend
@pytest.mark.parametrize("visibility_s", [0, 1])
def test_ending_one_lease_makes_that_message_and_its_group_available(
    store: LeaseStore, clock: ManualClock, visibility_s: int
) -> None:
    # Given g1-m1 and g1-m2 in flight for 30 s, g2-m1 waiting
    log = sent("g1-m1", "g1-m2", "g2-m1")
    store.ingest(PK, log)
    assert receive(store, clock, 2) == ["g1-m1", "g1-m2"]
    # When g1-m1's visibility is changed to 0 (or 1 s, and that second passes)
    store.change_visibility(PK, 0, 1, clock.now_ms(), visibility_s * SECOND_MS)
    clock.advance(2 * SECOND_MS)
    # Then g2-m1 (waiting longer) and g1-m1 come, and g1-m2 stays in flight
    assert receive(store, clock, 3) == ["g2-m1", "g1-m1"]


@on_every_backend
def test_extending_one_lease_hides_that_message_and_the_later_ones_only(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given g1-m1..m3 received with a 5 s lease, and g1-m2's extended to 60 s
    store.ingest(PK, sent("g1-m1", "g1-m2", "g1-m3"))
    assert receive(store, clock, 3, visibility_ms=5 * SECOND_MS) == ["g1-m1", "g1-m2", "g1-m3"]
    store.change_visibility(PK, 1, 1, clock.now_ms(), 60 * SECOND_MS)
    # When the other leases end
    clock.advance(6 * SECOND_MS)
    # Then g1-m1 comes again, and g1-m3 waits behind g1-m2
    assert receive(store, clock, 10) == ["g1-m1"]


@on_every_backend
def test_a_group_whose_received_messages_were_deleted_keeps_its_place_from_its_next_send(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given (the second "g1-m2" deduplicated away by AWS, so not sent here)
    log = sent("g1-m1", "g2-m1", "g1-m2", "g2-m2", "g1-m3", "g1-m4", "g3-m1")
    store.ingest(PK, log)
    assert receive(store, clock, 2) == ["g1-m1", "g1-m2"]
    # When both are deleted
    store.remove(PK, offset_of("g1-m1", log), clock.now_ms())
    store.remove(PK, offset_of("g1-m2", log), clock.now_ms())
    # Then g1 comes after g2 and before g3, by when its next message was sent
    assert receive(store, clock, 10) == ["g2-m1", "g2-m2", "g1-m3", "g1-m4", "g3-m1"]


@on_every_backend
def test_a_group_with_a_message_still_in_flight_stays_unavailable(
    store: LeaseStore, clock: ManualClock
) -> None:
    log = sent("g1-m1", "g2-m1", "g1-m2", "g2-m2", "g1-m3", "g1-m4", "g3-m1")
    store.ingest(PK, log)
    assert receive(store, clock, 2) == ["g1-m1", "g1-m2"]
    store.remove(PK, offset_of("g1-m1", log), clock.now_ms())
    assert receive(store, clock, 10) == ["g2-m1", "g2-m2", "g3-m1"]


@on_every_backend
def test_a_receive_takes_a_group_whole_before_an_interleaved_one(
    store: LeaseStore, clock: ManualClock
) -> None:
    store.ingest(PK, sent("g1-m1", "g2-m1", "g1-m2", "g1-m3"))
    assert receive(store, clock, 10) == ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]


@on_every_backend
def test_a_returned_group_waits_behind_a_group_deep_in_the_backlog(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given 100 messages of a, then b's (all sent at once), and a's first returned from flight
    store.ingest(PK, sent(*[f"a-{n}" for n in range(100)], "b-0", step_ms=0))
    assert receive(store, clock, 1, visibility_ms=SECOND_MS) == ["a-0"]
    clock.advance(2 * SECOND_MS)
    # Then b, waiting since its send, comes before a
    assert receive(store, clock, 1) == ["b-0"]


@on_every_backend
def test_past_the_order_window_a_returned_group_may_come_first(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a's backlog longer than the window the order is exact in (the documented bound)
    depth = fifo_groups.ORDER_WINDOW + 500
    store.ingest(PK, sent(*[f"a-{n}" for n in range(depth)], "b-0", step_ms=0))
    assert receive(store, clock, 1, visibility_ms=SECOND_MS) == ["a-0"]
    clock.advance(2 * SECOND_MS)
    # Then a's message comes again first; b is served by the next receive
    assert receive(store, clock, 1) == ["a-0"]
    assert receive(store, clock, 1) == ["b-0"]
