"""`LeaseStore.expire` (retention in every state) and `LeaseStore.hold` (message move tasks),
run against every `KeyValueStore` backend with a manual clock."""

from __future__ import annotations

from lease_store.clock import ManualClock
from lease_store.store import LeaseStore
from lease_store.types import Counts
from tests.support.builders import (
    DAY_MS,
    SECOND_MS,
    T0,
    a_partition,
    on_every_backend,
    records,
)

RETENTION_MS = 4 * DAY_MS
VISIBILITY_MS = 30 * SECOND_MS
HOLD_MS = 60 * SECOND_MS
PK = a_partition()


def counts(store: LeaseStore, clock: ManualClock) -> Counts:
    return store.counts(PK, clock.now_ms())


# -- expire -------------------------------------------------------------------------------


@on_every_backend
def test_expire_drops_visible_in_flight_and_delayed_messages_past_retention(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a visible, an in-flight and a delayed message, all sent at T0, and a later one
    store.ingest(PK, records([0, 1]))
    store.ingest(PK, records([2], delay_s=900))
    store.receive(PK, T0, 1, 10 * DAY_MS, RETENTION_MS)  # offset 0, in flight for days
    store.ingest(PK, records([3], sent_ms=T0 + SECOND_MS))
    clock.advance(RETENTION_MS)

    # When the retention period of the first three has passed
    dropped = store.expire(PK, clock.now_ms(), RETENTION_MS)

    # Then they are gone, from the counters too, and only the later one is left
    assert dropped == 3
    assert counts(store, clock) == Counts(visible=1, in_flight=0, delayed=0)
    assert all(store.fact(PK, offset) is None for offset in (0, 1, 2))
    assert all(store.message(PK, offset) is None for offset in (0, 1, 2))
    assert store.backlog_start(PK) == 3


@on_every_backend
def test_expire_follows_sent_time_not_offset_order(store: LeaseStore, clock: ManualClock) -> None:
    # Given a dead-letter queue: later offsets may carry older SentTimestamps
    store.ingest(PK, records([0], sent_ms=T0))
    store.ingest(PK, records([1], sent_ms=T0 - DAY_MS))
    clock.advance(RETENTION_MS - DAY_MS)

    # When
    dropped = store.expire(PK, clock.now_ms(), RETENTION_MS)

    # Then only the older one, at offset 1, expired
    assert dropped == 1
    assert store.fact(PK, 0) is not None
    assert store.fact(PK, 1) is None


@on_every_backend
def test_expire_before_retention_ends_drops_nothing(store: LeaseStore, clock: ManualClock) -> None:
    store.ingest(PK, records([0, 1]))
    clock.advance(RETENTION_MS - 1)

    assert store.expire(PK, clock.now_ms(), RETENTION_MS) == 0
    assert counts(store, clock) == Counts(visible=2, in_flight=0, delayed=0)


@on_every_backend
def test_messages_removed_otherwise_leave_nothing_to_expire(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given messages deleted, purged and dropped by a receive before the sweep
    store.ingest(PK, records([0, 1, 2, 3]))
    store.remove(PK, 0, T0)
    store.purge(PK, before_offset=2, now_ms=T0)
    clock.advance(RETENTION_MS)
    store.receive(PK, clock.now_ms(), 1, VISIBILITY_MS, RETENTION_MS)  # drops 2 and 3

    # When
    dropped = store.expire(PK, clock.now_ms(), RETENTION_MS)

    # Then
    assert dropped == 0
    assert counts(store, clock) == Counts()


# -- hold ---------------------------------------------------------------------------------


@on_every_backend
def test_hold_takes_visible_messages_oldest_first_without_counting_a_receive(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given three visible messages, one of them received once before
    store.ingest(PK, records([0, 1, 2]))
    store.receive(PK, T0, 1, 0, RETENTION_MS)  # offset 0, visible again at once

    # When two are held
    held = store.hold(PK, T0, 2, HOLD_MS, RETENTION_MS)

    # Then they are out of sight for the hold, and their receive facts are unchanged
    assert [d.offset for d in held] == [0, 1]
    assert [d.fact.receive_count for d in held] == [1, 0]
    assert [d.message.message_id for d in held] == ["msg-0", "msg-1"]
    assert all(d.fact.visible_at_ms == T0 + HOLD_MS for d in held)
    outcome = store.receive(PK, T0, 10, VISIBILITY_MS, RETENTION_MS)
    assert [d.offset for d in outcome.delivered] == [2]


@on_every_backend
def test_a_held_message_removed_is_gone_and_one_not_removed_comes_back(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given two held messages
    store.ingest(PK, records([0, 1]))
    store.hold(PK, T0, 2, HOLD_MS, RETENTION_MS)

    # When the first is removed (moved) and the hold ends
    store.remove(PK, 0, T0)
    clock.advance(HOLD_MS)

    # Then only the second is receivable again, never having been received
    outcome = store.receive(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS)
    assert [(d.offset, d.fact.receive_count) for d in outcome.delivered] == [(1, 1)]


@on_every_backend
def test_hold_drops_expired_messages_instead_of_holding_them(
    store: LeaseStore, clock: ManualClock
) -> None:
    store.ingest(PK, records([0], sent_ms=T0 - RETENTION_MS))
    store.ingest(PK, records([1]))

    held = store.hold(PK, T0, 10, HOLD_MS, RETENTION_MS)

    assert [d.offset for d in held] == [1]
    assert store.fact(PK, 0) is None


@on_every_backend
def test_counts_during_a_hold_follow_the_facts(store: LeaseStore, clock: ManualClock) -> None:
    # Given a never-received message and one received before, both held
    store.ingest(PK, records([0, 1]))
    store.receive(PK, T0, 1, 0, RETENTION_MS)
    store.hold(PK, T0, 2, HOLD_MS, RETENTION_MS)

    # Then neither is visible: the received one counts in flight, the other delayed
    assert counts(store, clock) == Counts(visible=0, in_flight=1, delayed=1)
    clock.advance(HOLD_MS)
    assert counts(store, clock) == Counts(visible=2, in_flight=0, delayed=0)
