"""`LeaseStore` behaviour, run against every `KeyValueStore` backend.

Time only moves when a test advances its `ManualClock`; every call is given `clock.now_ms()`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from lease_store import keys as store_keys
from lease_store import state
from lease_store.clock import ManualClock
from lease_store.errors import LeaseError, MessageNotAvailable
from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore, WriteBatch
from lease_store.rocks import RocksKeyValueStore
from lease_store.state import MessageState
from lease_store.store import LeaseStore
from lease_store.types import Counts, PartitionState, ReceiveOutcome
from tests.support.builders import (
    DAY_MS,
    SECOND_MS,
    T0,
    a_message,
    a_partition,
    on_every_backend,
    records,
)

VISIBILITY_MS = 30 * SECOND_MS
RETENTION_MS = 4 * DAY_MS

PK = a_partition()


def receive(
    store: LeaseStore,
    clock: ManualClock,
    *,
    pk: PartitionKey = PK,
    max_messages: int = 10,
    visibility_ms: int = VISIBILITY_MS,
    retention_ms: int = RETENTION_MS,
    max_receive_count: int | None = None,
) -> ReceiveOutcome:
    return store.receive(
        pk,
        clock.now_ms(),
        max_messages=max_messages,
        visibility_ms=visibility_ms,
        retention_ms=retention_ms,
        max_receive_count=max_receive_count,
    )


def offsets_of(outcome: ReceiveOutcome) -> list[int]:
    return [delivery.offset for delivery in outcome.delivered]


def counts(store: LeaseStore, clock: ManualClock, pk: PartitionKey = PK) -> Counts:
    return store.counts(pk, clock.now_ms())


# -- receive and visibility ---------------------------------------------------------------


@on_every_backend
def test_an_ingested_message_is_received_with_receipt_epoch_1(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    message = a_message("msg-0", body=b"payload")
    store.ingest(PK, [(0, message)])

    # When
    outcome = receive(store, clock)

    # Then
    [delivery] = outcome.delivered
    assert delivery.offset == 0
    assert delivery.message == message
    assert delivery.fact.receive_count == 1  # the receipt epoch of this receive
    assert delivery.fact.first_receive_ms == T0
    assert delivery.fact.last_receive_ms == T0
    assert delivery.fact.visible_at_ms == T0 + VISIBILITY_MS
    assert outcome.dead_letter == []
    assert outcome.expired == 0


@on_every_backend
def test_a_stored_message_keeps_its_body_and_attributes(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message whose body is not text
    message = a_message("msg-0", body=bytes(range(256)), message_group_id="group-a")
    store.ingest(PK, [(0, message)])

    # When
    [delivery] = receive(store, clock).delivered

    # Then
    assert delivery.message == message
    assert store.message(PK, 0) == message


@on_every_backend
def test_ingest_at_a_time_counts_what_is_visible_then_without_a_sweep(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given three messages visible on arrival and one delayed by 10 s, ingested at T0
    store.ingest(PK, records(range(3)) + records([3], delay_s=10), clock.now_ms())

    # Then they are counted (and indexed) as visible at once, the delayed one as delayed
    st = store.partition_state(PK)  # no sweep: the counters as written
    assert (st.visible, st.delayed, st.swept_until_ms) == (3, 1, T0)

    # And once the delay is over all four are received, in log order
    clock.advance(10 * SECOND_MS)
    assert offsets_of(receive(store, clock)) == [0, 1, 2, 3]


@on_every_backend
def test_receive_of_an_empty_partition_returns_nothing(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given nothing ingested
    # When
    outcome = receive(store, clock)

    # Then
    assert outcome == ReceiveOutcome()


@on_every_backend
def test_receive_hides_the_message_until_its_visibility_timeout_ends(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message received at T0
    store.ingest(PK, records([0]))
    receive(store, clock)

    # When the visibility timeout has not quite passed
    clock.advance(VISIBILITY_MS - 1)
    while_hidden = receive(store, clock)

    # Then it is not received again
    assert while_hidden.delivered == []


@on_every_backend
def test_a_message_is_received_again_once_its_visibility_timeout_ends(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message received at T0
    store.ingest(PK, records([0]))
    receive(store, clock)

    # When the visibility timeout passes
    clock.advance(VISIBILITY_MS)
    again = receive(store, clock)

    # Then it comes back with a new epoch and the original first receive time
    [delivery] = again.delivered
    assert delivery.offset == 0
    assert delivery.fact.receive_count == 2
    assert delivery.fact.first_receive_ms == T0
    assert delivery.fact.last_receive_ms == T0 + VISIBILITY_MS
    assert store.fact(PK, 0) == delivery.fact


@on_every_backend
def test_a_delayed_message_is_not_received_before_its_delay_ends(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message sent at T0 with a 10 s delay
    store.ingest(PK, records([0], delay_s=10))

    # When
    clock.advance(10 * SECOND_MS - 1)
    during_delay = receive(store, clock)
    clock.advance(1)
    after_delay = receive(store, clock)

    # Then
    assert during_delay.delivered == []
    assert offsets_of(after_delay) == [0]
    assert after_delay.delivered[0].fact.receive_count == 1


@on_every_backend
def test_a_delayed_message_is_counted_as_delayed_until_its_delay_ends(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0], delay_s=10))

    # When
    during_delay = counts(store, clock)
    clock.advance(10 * SECOND_MS)
    after_delay = counts(store, clock)

    # Then
    assert during_delay == Counts(visible=0, in_flight=0, delayed=1)
    assert after_delay == Counts(visible=1, in_flight=0, delayed=0)


@on_every_backend
def test_receive_returns_at_most_max_messages_oldest_first(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given offset 0 became visible last (delayed 5 s), 1 and 2 at T0, 3 at T0 + 1 s
    store.ingest(PK, records([0], delay_s=5))
    store.ingest(PK, records([1, 2]))
    store.ingest(PK, records([3], sent_ms=T0 + SECOND_MS))
    clock.advance(5 * SECOND_MS)

    # When
    first = receive(store, clock, max_messages=3)
    second = receive(store, clock, max_messages=3)

    # Then: log order, whenever each became visible
    assert offsets_of(first) == [0, 1, 2]
    assert offsets_of(second) == [3]


@on_every_backend
def test_a_message_visible_again_comes_before_newer_ones_visible_since_earlier(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given offset 0 received at T0 with a 30 s lease; offsets 1 and 2 sent at T0 + 10 s,
    # visible from then on (before offset 0 is visible again)
    store.ingest(PK, records([0]))
    receive(store, clock, max_messages=1, visibility_ms=30 * SECOND_MS)
    clock.advance(10 * SECOND_MS)
    store.ingest(PK, records([1, 2], sent_ms=clock.now_ms()))
    assert store.counts(PK, clock.now_ms()) == Counts(visible=2, in_flight=1)

    # When the lease has ended
    clock.advance(25 * SECOND_MS)
    again = receive(store, clock, max_messages=2)

    # Then the oldest message is served first, as SQS does
    assert offsets_of(again) == [0, 1]
    assert store.counts(PK, clock.now_ms()) == Counts(visible=1, in_flight=2)


@on_every_backend
def test_a_message_whose_lease_ended_is_older_than_one_visible_since_later(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given offset 0, received at T0, visible again at T0 + 30 s; offset 1 sent at T0 + 40 s
    store.ingest(PK, records([0]))
    receive(store, clock)
    store.ingest(PK, records([1], sent_ms=T0 + 40 * SECOND_MS))
    clock.advance(40 * SECOND_MS)

    # When
    outcome = receive(store, clock, max_messages=1)

    # Then
    assert offsets_of(outcome) == [0]


@on_every_backend
def test_receive_with_zero_visibility_does_not_return_a_message_twice_in_one_call(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0, 1, 2]))

    # When
    outcome = receive(store, clock, max_messages=10, visibility_ms=0)

    # Then
    assert offsets_of(outcome) == [0, 1, 2]
    assert [d.fact.receive_count for d in outcome.delivered] == [1, 1, 1]


@on_every_backend
def test_a_message_received_with_zero_visibility_can_be_received_again_at_once(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0]))
    receive(store, clock, visibility_ms=0)

    # When
    again = receive(store, clock, visibility_ms=0)

    # Then
    assert offsets_of(again) == [0]
    assert again.delivered[0].fact.receive_count == 2
    assert counts(store, clock) == Counts(visible=1, in_flight=0, delayed=0)


@on_every_backend
def test_has_visible_tells_whether_a_receive_would_find_a_message(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0]))
    before = store.has_visible(PK, clock.now_ms())

    # When
    receive(store, clock)

    # Then
    assert before is True
    assert store.has_visible(PK, clock.now_ms()) is False
    assert store.has_visible(PK, clock.now_ms() + VISIBILITY_MS) is True


# -- counts -------------------------------------------------------------------------------


@on_every_backend
def test_in_flight_at_most_bounds_the_exact_count_without_reading_the_clock(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given two messages, one received
    store.ingest(PK, records([0, 1]))
    receive(store, clock, max_messages=1)
    assert store.in_flight_at_most(PK) == 1

    # When its lease has ended but nothing has looked since
    clock.advance(VISIBILITY_MS)

    # Then the bound still counts it, while the exact count (which sweeps) does not
    assert store.in_flight_at_most(PK) == 1
    assert counts(store, clock).in_flight == 0
    assert store.in_flight_at_most(PK) == 0


@on_every_backend
def test_counts_stay_exact_through_a_sequence_of_operations(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given three messages and one delayed by 60 s
    store.ingest(PK, records([0, 1, 2]))
    store.ingest(PK, records([3], delay_s=60))
    assert counts(store, clock) == Counts(visible=3, in_flight=0, delayed=1)

    # When two are received
    assert offsets_of(receive(store, clock, max_messages=2)) == [0, 1]
    # Then
    assert counts(store, clock) == Counts(visible=1, in_flight=2, delayed=1)

    # When their leases end
    clock.advance(VISIBILITY_MS)
    # Then
    assert counts(store, clock) == Counts(visible=3, in_flight=0, delayed=1)

    # When the oldest one (offset 0, first in log order) is received again
    assert offsets_of(receive(store, clock, max_messages=1)) == [0]
    # Then
    assert counts(store, clock) == Counts(visible=2, in_flight=1, delayed=1)

    # When its visibility is set to 0
    store.change_visibility(PK, 0, epoch=2, now_ms=clock.now_ms(), visibility_ms=0)
    # Then
    assert counts(store, clock) == Counts(visible=3, in_flight=0, delayed=1)

    # When the delay of offset 3 ends
    clock.advance(30 * SECOND_MS)
    # Then
    assert counts(store, clock) == Counts(visible=4, in_flight=0, delayed=0)

    # When a visible message is removed
    assert store.remove(PK, 3, clock.now_ms())
    # Then
    assert counts(store, clock) == Counts(visible=3, in_flight=0, delayed=0)

    # When all are received, and one of them removed
    assert offsets_of(receive(store, clock)) == [0, 1, 2]
    assert store.remove(PK, 1, clock.now_ms())
    # Then
    assert counts(store, clock) == Counts(visible=0, in_flight=2, delayed=0)

    # When one lease is extended and the other ends
    store.change_visibility(PK, 0, epoch=3, now_ms=clock.now_ms(), visibility_ms=2 * VISIBILITY_MS)
    clock.advance(VISIBILITY_MS)
    # Then
    assert counts(store, clock) == Counts(visible=1, in_flight=1, delayed=0)


@on_every_backend
def test_counts_are_the_same_whether_or_not_they_were_read_in_between(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given two partitions fed the same operations, one of them counted at every step
    watched, unwatched = a_partition(partition=0), a_partition(partition=1)
    for pk in (watched, unwatched):
        store.ingest(pk, records([0, 1], delay_s=1))

    # When
    for step in range(5):
        clock.advance(SECOND_MS)
        counts(store, clock, watched)
        for pk in (watched, unwatched):
            receive(store, clock, pk=pk, max_messages=1, visibility_ms=(step % 3) * SECOND_MS)
            counts(store, clock, watched)

    # Then
    assert counts(store, clock, watched) == counts(store, clock, unwatched)


@dataclass
class Lease:
    offset: int
    epoch: int


def recount(store: LeaseStore, pk: PartitionKey, offsets: range, now_ms: int) -> Counts:
    """The counts derived from every live lease fact, the slow way."""
    visible = in_flight = delayed = 0
    for offset in offsets:
        fact = store.fact(pk, offset)
        if fact is None:
            continue
        category = state.state_at(fact, now_ms)
        visible += category is MessageState.VISIBLE
        in_flight += category is MessageState.IN_FLIGHT
        delayed += category is MessageState.DELAYED
    return Counts(visible, in_flight, delayed)


@on_every_backend
@pytest.mark.parametrize("seed", range(4))
def test_counts_always_equal_a_recount_of_the_lease_facts(
    store: LeaseStore, clock: ManualClock, seed: int
) -> None:
    # Given a random but reproducible workload of every operation, with short retention
    rng = random.Random(seed)
    next_offset = 0
    leases: list[Lease] = []

    for _ in range(300):
        # When
        op = rng.choice(["ingest", "receive", "advance", "change", "remove", "counts"])
        now = clock.now_ms()
        if op == "ingest":
            count = rng.randint(1, 3)
            batch = records(
                range(next_offset, next_offset + count),
                sent_ms=now - rng.randint(0, 2_000),
                delay_s=rng.choice([0, 0, 1, 3]),
            )
            store.ingest(PK, batch)
            next_offset += count
        elif op == "receive":
            outcome = receive(
                store,
                clock,
                max_messages=rng.randint(1, 4),
                visibility_ms=rng.choice([0, 500, 1_000, 4_000]),
                retention_ms=20 * SECOND_MS,
                max_receive_count=3,
            )
            leases += [Lease(d.offset, d.fact.receive_count) for d in outcome.delivered]
            for held in outcome.dead_letter:
                if rng.random() < 0.5:
                    store.remove(PK, held.offset, now)
        elif op == "advance":
            clock.advance(rng.choice([1, 250, 999, 1_000, 3_000]))
        elif op == "change" and leases:
            lease = rng.choice(leases)
            try:
                store.change_visibility(
                    PK, lease.offset, lease.epoch, now, rng.choice([0, 700, 2_000])
                )
            except LeaseError:
                pass
        elif op == "remove" and leases:
            store.remove(PK, rng.choice(leases).offset, now)

        # Then
        now = clock.now_ms()
        assert counts(store, clock) == recount(store, PK, range(next_offset), now)


# -- ingestion ----------------------------------------------------------------------------


@on_every_backend
def test_ingest_returns_how_many_records_were_new_and_advances_the_applied_offset(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a partition nothing was ingested into
    assert store.applied_offset(PK) == -1

    # When
    added = store.ingest(PK, records([0, 1, 2]))

    # Then
    assert added == 3
    assert store.applied_offset(PK) == 2
    assert counts(store, clock) == Counts(visible=3, in_flight=0, delayed=0)


@on_every_backend
def test_ingest_is_idempotent_for_offsets_already_applied(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given offsets 0..2 ingested, and offsets 0 and 1 received
    store.ingest(PK, records([0, 1, 2]))
    receive(store, clock, max_messages=2)

    # When the log is replayed from the start, with one new record at the end
    added = store.ingest(PK, records([0, 1, 2, 3]))

    # Then only the new record is added and the leases are untouched
    assert added == 1
    assert store.applied_offset(PK) == 3
    assert counts(store, clock) == Counts(visible=2, in_flight=2, delayed=0)
    fact = store.fact(PK, 0)
    assert fact is not None and fact.receive_count == 1


@on_every_backend
def test_ingest_of_nothing_changes_nothing(store: LeaseStore, clock: ManualClock) -> None:
    # Given
    store.ingest(PK, records([0]))

    # When
    added = store.ingest(PK, [])

    # Then
    assert added == 0
    assert store.applied_offset(PK) == 0
    assert counts(store, clock) == Counts(visible=1, in_flight=0, delayed=0)


@on_every_backend
def test_ingest_of_a_removed_message_does_not_bring_it_back(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message that was received and deleted
    store.ingest(PK, records([0]))
    receive(store, clock)
    store.remove(PK, 0, clock.now_ms())

    # When its record is read again (a replay after a crash)
    added = store.ingest(PK, records([0]))

    # Then
    assert added == 0
    assert store.fact(PK, 0) is None
    assert counts(store, clock) == Counts()


def test_applied_offset_and_counts_survive_reopening_the_rocks_store(tmp_path: Path) -> None:
    # Given a Rocks-backed store with visible, in-flight and delayed messages
    clock, path = ManualClock(T0), tmp_path / "kv"
    first = LeaseStore(RocksKeyValueStore(path))
    first.ingest(PK, records([0, 1, 2]))
    first.ingest(PK, records([3], delay_s=60))
    receive(first, clock, max_messages=1)
    assert first.remove(PK, 1, clock.now_ms())
    before = counts(first, clock)
    first.close()

    # When it is reopened and the log replayed
    reopened = LeaseStore(RocksKeyValueStore(path))
    try:
        applied = reopened.applied_offset(PK)
        after = counts(reopened, clock)
        replayed = reopened.ingest(PK, records([0, 1, 2, 3]))
        after_replay = counts(reopened, clock)
        fact = reopened.fact(PK, 0)
    finally:
        reopened.close()

    # Then
    assert before == Counts(visible=1, in_flight=1, delayed=1)
    assert applied == 3
    assert after == before
    assert replayed == 0
    assert after_replay == before
    assert fact is not None and fact.receive_count == 1


def test_leases_keep_running_across_a_reopen_of_the_rocks_store(tmp_path: Path) -> None:
    # Given a message received just before the store was closed
    clock, path = ManualClock(T0), tmp_path / "kv"
    first = LeaseStore(RocksKeyValueStore(path))
    first.ingest(PK, records([0]))
    receive(first, clock)
    first.close()

    # When it is reopened, and time passes the lease
    reopened = LeaseStore(RocksKeyValueStore(path))
    try:
        while_leased = receive(reopened, clock)
        clock.advance(VISIBILITY_MS)
        after_lease = receive(reopened, clock)
    finally:
        reopened.close()

    # Then
    assert while_leased.delivered == []
    assert offsets_of(after_lease) == [0]
    assert after_lease.delivered[0].fact.receive_count == 2
    assert after_lease.delivered[0].fact.first_receive_ms == T0


# -- remove and change visibility ---------------------------------------------------------


@on_every_backend
def test_remove_returns_true_then_false_when_deleting_twice(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a received message
    store.ingest(PK, records([0]))
    receive(store, clock)

    # When
    first = store.remove(PK, 0, clock.now_ms())
    second = store.remove(PK, 0, clock.now_ms())

    # Then
    assert first is True
    assert second is False
    assert store.fact(PK, 0) is None
    assert store.message(PK, 0) is None
    assert counts(store, clock) == Counts()


@on_every_backend
def test_remove_many_removes_each_named_message_once_and_names_their_ids(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given four messages, three of them received and one of those already deleted
    store.ingest(PK, records([0, 1, 2, 3]))
    receive(store, clock, max_messages=3)
    assert store.remove(PK, 2, clock.now_ms())

    # When a batch names two of them (one twice), the deleted one and one never ingested
    removed = store.remove_many(PK, [1, 0, 1, 2, 9], clock.now_ms())

    # Then only the live ones are removed, each reported once with its MessageId
    assert removed == {1: "msg-1", 0: "msg-0"}
    for offset in (0, 1, 2):
        assert store.fact(PK, offset) is None
        assert store.message(PK, offset) is None
    assert counts(store, clock) == Counts(visible=1)
    assert offsets_of(receive(store, clock)) == [3]


@on_every_backend
def test_remove_many_names_the_ids_of_messages_received_before_a_restart(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given two messages received by a gateway that then restarted (the store reopened: the
    # ids it kept in memory for deletes are gone)
    store.ingest(PK, records([0, 1]))
    receive(store, clock, max_messages=2)
    reopened = LeaseStore(store.kv)

    # When both are deleted
    removed = reopened.remove_many(PK, [0, 1], clock.now_ms())

    # Then their ids come from the stored messages
    assert removed == {0: "msg-0", 1: "msg-1"}
    assert counts(reopened, clock) == Counts()


@on_every_backend
def test_remove_many_leaves_no_key_of_the_messages_whether_their_receive_is_remembered_or_not(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given messages sent at different times, received by this store (which remembers their
    # ids and SentTimestamps) and by a store since reopened (which does not)
    store.ingest(PK, records([0, 1], sent_ms=T0 - 5 * SECOND_MS) + records([2, 3], sent_ms=T0))
    receive(store, clock, max_messages=4)
    reopened = LeaseStore(store.kv)

    # When each store deletes two of them
    assert store.remove_many(PK, [0, 2], clock.now_ms()) == {0: "msg-0", 2: "msg-2"}
    assert reopened.remove_many(PK, [1, 3], clock.now_ms()) == {1: "msg-1", 3: "msg-3"}

    # Then nothing of them is left: facts, stored messages, expiry-index entries
    for region in (b"F", b"M", b"X"):
        assert store.kv.scan(region + PK.prefix, region + PK.prefix + b"\xff" * 40) == []


@on_every_backend
def test_remove_many_of_nothing_live_writes_nothing(store: LeaseStore, clock: ManualClock) -> None:
    store.ingest(PK, records([0]))

    assert store.remove_many(PK, [5, 6], clock.now_ms()) == {}
    assert counts(store, clock) == Counts(visible=1)


@on_every_backend
def test_a_removed_message_is_never_received_again(store: LeaseStore, clock: ManualClock) -> None:
    # Given
    store.ingest(PK, records([0, 1]))
    receive(store, clock)
    store.remove(PK, 0, clock.now_ms())

    # When
    clock.advance(VISIBILITY_MS)
    outcome = receive(store, clock)

    # Then
    assert offsets_of(outcome) == [1]


@on_every_backend
def test_remove_of_an_offset_never_ingested_returns_false(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given / When
    removed = store.remove(PK, 99, clock.now_ms())

    # Then
    assert removed is False
    assert counts(store, clock) == Counts()


@on_every_backend
def test_change_visibility_of_a_removed_message_raises_message_not_available(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0]))
    receive(store, clock)
    store.remove(PK, 0, clock.now_ms())

    # When / Then
    with pytest.raises(MessageNotAvailable):
        store.change_visibility(PK, 0, epoch=1, now_ms=clock.now_ms(), visibility_ms=0)


@on_every_backend
def test_change_visibility_counts_from_now(store: LeaseStore, clock: ManualClock) -> None:
    # Given a message received at T0
    store.ingest(PK, records([0]))
    receive(store, clock)

    # When, 20 s later, its visibility is set to 30 s
    clock.advance(20 * SECOND_MS)
    changed = store.change_visibility(PK, 0, 1, clock.now_ms(), VISIBILITY_MS)

    # Then it is hidden until T0 + 50 s, not T0 + 30 s
    assert changed.visible_at_ms == T0 + 50 * SECOND_MS
    assert store.next_visible_at_ms(PK, clock.now_ms()) == T0 + 50 * SECOND_MS
    clock.advance(VISIBILITY_MS - 1)
    assert receive(store, clock).delivered == []
    clock.advance(1)
    assert offsets_of(receive(store, clock)) == [0]


@on_every_backend
def test_change_visibility_to_zero_makes_the_message_receivable_at_once(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0]))
    receive(store, clock)

    # When
    store.change_visibility(PK, 0, epoch=1, now_ms=clock.now_ms(), visibility_ms=0)
    again = receive(store, clock)

    # Then
    assert offsets_of(again) == [0]
    assert again.delivered[0].fact.receive_count == 2


@on_every_backend
def test_change_visibility_applies_once_and_the_next_receive_uses_its_own_timeout(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a lease extended to 10 minutes, then ended early
    store.ingest(PK, records([0]))
    receive(store, clock)
    store.change_visibility(PK, 0, 1, clock.now_ms(), 600 * SECOND_MS)
    store.change_visibility(PK, 0, 1, clock.now_ms(), 0)

    # When it is received again
    [delivery] = receive(store, clock, visibility_ms=VISIBILITY_MS).delivered

    # Then
    assert delivery.fact.visible_at_ms == clock.now_ms() + VISIBILITY_MS


@on_every_backend
def test_change_visibility_with_a_superseded_handle_changes_it(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message received twice
    store.ingest(PK, records([0]))
    receive(store, clock)
    clock.advance(VISIBILITY_MS)
    receive(store, clock)

    # When the first receive's handle sets its visibility to 0 (AWS accepts it)
    store.change_visibility(PK, 0, epoch=1, now_ms=clock.now_ms(), visibility_ms=0)

    # Then it is visible, and received again first
    assert counts(store, clock) == Counts(visible=1, in_flight=0, delayed=0)
    assert offsets_of(receive(store, clock)) == [0]


@on_every_backend
def test_change_visibility_of_a_message_whose_lease_ended_hides_it_again(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a received message whose lease ended, nobody having received it since
    store.ingest(PK, records([0]))
    receive(store, clock)
    clock.advance(VISIBILITY_MS)
    assert counts(store, clock) == Counts(visible=1, in_flight=0, delayed=0)

    # When its visibility is changed to 60 s
    store.change_visibility(PK, 0, epoch=1, now_ms=clock.now_ms(), visibility_ms=60 * SECOND_MS)

    # Then it is in flight again, and visible once that has passed
    assert counts(store, clock) == Counts(visible=0, in_flight=1, delayed=0)
    assert offsets_of(receive(store, clock)) == []
    clock.advance(60 * SECOND_MS)
    assert offsets_of(receive(store, clock)) == [0]


@on_every_backend
def test_a_superseded_handle_may_still_remove_the_message(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message received twice (removal is by offset: any valid handle may delete)
    store.ingest(PK, records([0]))
    receive(store, clock)
    clock.advance(VISIBILITY_MS)
    receive(store, clock)

    # When
    removed = store.remove(PK, 0, clock.now_ms())

    # Then
    assert removed is True
    assert counts(store, clock) == Counts()


# -- retention and redrive ----------------------------------------------------------------


@on_every_backend
def test_expired_messages_are_dropped_counted_and_never_delivered(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given offset 0 sent exactly one retention period ago, offset 1 just before the cut-off
    store.ingest(PK, records([0], sent_ms=T0 - RETENTION_MS))
    store.ingest(PK, records([1], sent_ms=T0 - RETENTION_MS + 1))
    store.ingest(PK, records([2]))

    # When
    outcome = receive(store, clock)

    # Then
    assert offsets_of(outcome) == [1, 2]
    assert outcome.expired == 1
    assert store.fact(PK, 0) is None
    assert store.message(PK, 0) is None
    assert counts(store, clock) == Counts(visible=0, in_flight=2, delayed=0)


@on_every_backend
def test_expired_messages_do_not_use_up_max_messages(store: LeaseStore, clock: ManualClock) -> None:
    # Given three expired messages ahead of two live ones
    store.ingest(PK, records([0, 1, 2], sent_ms=T0 - RETENTION_MS))
    store.ingest(PK, records([3, 4]))

    # When
    outcome = receive(store, clock, max_messages=2)

    # Then
    assert offsets_of(outcome) == [3, 4]
    assert outcome.expired == 3


@on_every_backend
def test_a_message_whose_retention_ends_while_in_flight_is_not_delivered_again(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message received one second before its retention period ends
    store.ingest(PK, records([0], sent_ms=T0 - RETENTION_MS + SECOND_MS))
    assert offsets_of(receive(store, clock)) == [0]

    # When its lease ends
    clock.advance(VISIBILITY_MS)
    outcome = receive(store, clock)

    # Then
    assert outcome.delivered == []
    assert outcome.expired == 1
    assert counts(store, clock) == Counts()


@on_every_backend
def test_a_message_received_max_times_is_handed_back_for_dead_lettering(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message received twice under maxReceiveCount 2
    store.ingest(PK, records([0]))
    for _ in range(2):
        assert offsets_of(receive(store, clock, max_receive_count=2)) == [0]
        clock.advance(VISIBILITY_MS)

    # When
    outcome = receive(store, clock, max_receive_count=2)

    # Then it is not delivered, and the attempt is not counted as a receive
    assert outcome.delivered == []
    [held] = outcome.dead_letter
    assert held.offset == 0
    assert held.message.message_id == "msg-0"
    assert held.fact.receive_count == 2
    fact = store.fact(PK, 0)
    assert fact is not None and fact.receive_count == 2


@on_every_backend
def test_a_message_held_for_dead_lettering_is_not_handed_back_again_until_the_hold_ends(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a message held for the dead-letter move
    store.ingest(PK, records([0]))
    receive(store, clock, max_receive_count=1)
    clock.advance(VISIBILITY_MS)
    [held] = receive(store, clock, max_receive_count=1).dead_letter

    # When
    during_hold = receive(store, clock, max_receive_count=1)
    clock.advance(held.fact.visible_at_ms - clock.now_ms())
    after_hold = receive(store, clock, max_receive_count=1)

    # Then
    assert during_hold == ReceiveOutcome()
    assert [d.offset for d in after_hold.dead_letter] == [0]
    assert after_hold.delivered == []


@on_every_backend
def test_a_dead_lettered_message_is_gone_once_removed(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0, 1]))
    receive(store, clock, max_receive_count=1, max_messages=1)
    clock.advance(VISIBILITY_MS)
    outcome = receive(store, clock, max_receive_count=1)
    assert [d.offset for d in outcome.dead_letter] == [0]
    assert offsets_of(outcome) == [1]

    # When the caller has moved it to the dead-letter queue
    removed = store.remove(PK, 0, clock.now_ms())

    # Then
    assert removed is True
    assert counts(store, clock) == Counts(visible=0, in_flight=1, delayed=0)
    clock.advance(DAY_MS)
    assert offsets_of(receive(store, clock, max_receive_count=1)) == []


@on_every_backend
def test_without_a_redrive_policy_a_message_is_received_any_number_of_times(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given
    store.ingest(PK, records([0]))

    # When
    outcomes = []
    for _ in range(5):
        outcomes.append(receive(store, clock, visibility_ms=0, max_receive_count=None))

    # Then
    assert [o.delivered[0].fact.receive_count for o in outcomes] == [1, 2, 3, 4, 5]
    assert all(o.dead_letter == [] for o in outcomes)


# -- purge and drop -----------------------------------------------------------------------


@on_every_backend
def test_purge_drops_the_messages_below_an_offset(store: LeaseStore, clock: ManualClock) -> None:
    # Given five messages, one of them in flight
    store.ingest(PK, records([0, 1, 2, 3, 4]))
    receive(store, clock, max_messages=1)

    # When
    dropped = store.purge(PK, before_offset=3, now_ms=clock.now_ms())

    # Then
    assert dropped == 3
    assert counts(store, clock) == Counts(visible=2, in_flight=0, delayed=0)
    assert [store.fact(PK, offset) for offset in (0, 1, 2)] == [None, None, None]
    assert offsets_of(receive(store, clock)) == [3, 4]


@on_every_backend
def test_ingest_of_purged_offsets_not_yet_read_is_refused(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a purge up to offset 5 while only offsets 0 and 1 were read from the log
    store.ingest(PK, records([0, 1]))
    store.purge(PK, before_offset=5, now_ms=clock.now_ms())

    # When the rest of the log is read
    added = store.ingest(PK, records([2, 3, 4, 5, 6]))

    # Then
    assert added == 2
    assert store.applied_offset(PK) == 6
    assert offsets_of(receive(store, clock)) == [5, 6]


def test_applied_offset_of_records_skipped_by_a_purge_survives_reopening(tmp_path: Path) -> None:
    # Given a Rocks-backed store purged ahead of ingestion, then fed only purged records
    clock, path = ManualClock(T0), tmp_path / "kv"
    first = LeaseStore(RocksKeyValueStore(path))
    first.purge(PK, before_offset=5, now_ms=clock.now_ms())
    assert first.ingest(PK, records([0, 1, 2, 3, 4])) == 0
    applied_before = first.applied_offset(PK)
    first.close()

    # When
    reopened = LeaseStore(RocksKeyValueStore(path))
    try:
        applied_after = reopened.applied_offset(PK)
    finally:
        reopened.close()

    # Then
    assert applied_before == 4
    assert applied_after == 4


@on_every_backend
def test_drop_partition_forgets_everything_about_it(store: LeaseStore, clock: ManualClock) -> None:
    # Given a partition with visible, in-flight and delayed messages, and a purge watermark
    store.ingest(PK, records([0, 1, 2]))
    store.ingest(PK, records([3], delay_s=60))
    receive(store, clock, max_messages=1)
    store.purge(PK, before_offset=1, now_ms=clock.now_ms())

    # When
    dropped = store.drop_partition(PK)

    # Then: what it still held is named, for the changelog to forget too
    assert dropped == [1, 2, 3]
    assert store.applied_offset(PK) == -1
    assert counts(store, clock) == Counts()
    assert all(store.fact(PK, offset) is None for offset in range(4))
    assert all(store.message(PK, offset) is None for offset in range(4))
    assert store.next_visible_at_ms(PK, clock.now_ms()) is None
    assert receive(store, clock) == ReceiveOutcome()


@on_every_backend
def test_a_dropped_partition_starts_afresh(store: LeaseStore, clock: ManualClock) -> None:
    # Given a dropped partition that had been purged up to offset 5
    store.ingest(PK, records([0, 1, 2]))
    store.purge(PK, before_offset=5, now_ms=clock.now_ms())
    store.drop_partition(PK)

    # When a new queue of the same coordinates ingests from offset 0
    added = store.ingest(PK, records([0, 1]))

    # Then
    assert added == 2
    assert offsets_of(receive(store, clock)) == [0, 1]


# -- next visible time --------------------------------------------------------------------


@on_every_backend
def test_next_visible_at_is_none_when_nothing_is_pending(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given an empty partition, then one with only visible messages
    empty = store.next_visible_at_ms(PK, clock.now_ms())
    store.ingest(PK, records([0]))

    # When
    only_visible = store.next_visible_at_ms(PK, clock.now_ms())

    # Then
    assert empty is None
    assert only_visible is None


@on_every_backend
def test_next_visible_at_is_the_earliest_future_lease_or_delay_end(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given delays ending at T0 + 10 s and T0 + 5 s, and a lease ending at T0 + 3 s
    store.ingest(PK, records([0], delay_s=10))
    store.ingest(PK, records([1], delay_s=5))
    store.ingest(PK, records([2]))
    receive(store, clock, visibility_ms=3 * SECOND_MS)

    # When
    at_start = store.next_visible_at_ms(PK, clock.now_ms())
    at_lease_end = store.next_visible_at_ms(PK, T0 + 3 * SECOND_MS)
    just_before_last = store.next_visible_at_ms(PK, T0 + 10 * SECOND_MS - 1)
    at_last = store.next_visible_at_ms(PK, T0 + 10 * SECOND_MS)

    # Then
    assert at_start == T0 + 3 * SECOND_MS
    assert at_lease_end == T0 + 5 * SECOND_MS
    assert just_before_last == T0 + 10 * SECOND_MS
    assert at_last is None


@on_every_backend
def test_next_visible_at_forgets_a_removed_message(store: LeaseStore, clock: ManualClock) -> None:
    # Given
    store.ingest(PK, records([0]))
    receive(store, clock)

    # When
    store.remove(PK, 0, clock.now_ms())

    # Then
    assert store.next_visible_at_ms(PK, clock.now_ms()) is None


@on_every_backend
def test_next_visible_at_follows_removals_and_new_leases_after_it_was_read(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given leases ending at T0 + 30 s, + 31 s and + 32 s, the first read as the next
    store.ingest(PK, records([0, 1, 2]))
    for _ in range(3):
        receive(store, clock, max_messages=1)
        clock.advance(SECOND_MS)
    first = store.next_visible_at_ms(PK, clock.now_ms())

    # When the first two are deleted, then a lease ending before the third is taken
    store.remove(PK, 0, clock.now_ms())
    after_one = store.next_visible_at_ms(PK, clock.now_ms())
    store.remove(PK, 1, clock.now_ms())
    after_two = store.next_visible_at_ms(PK, clock.now_ms())
    store.ingest(PK, records([3]))
    receive(store, clock, visibility_ms=5 * SECOND_MS)
    with_new = store.next_visible_at_ms(PK, clock.now_ms())

    # Then each answer is the earliest live lease end
    assert (first, after_one, after_two) == (T0 + VISIBILITY_MS, T0 + 31_000, T0 + 32_000)
    assert with_new == clock.now_ms() + 5 * SECOND_MS


# -- isolation ----------------------------------------------------------------------------


@on_every_backend
def test_partitions_and_queues_do_not_see_each_others_messages(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given the same offsets in two partitions of one queue and in a partition of another queue
    queue_a_p0, queue_a_p1, queue_b_p0 = a_partition(1, 0), a_partition(1, 1), a_partition(2, 0)
    store.ingest(queue_a_p0, [(0, a_message("a0-0")), (1, a_message("a0-1"))])
    store.ingest(queue_a_p1, [(0, a_message("a1-0", delay_s=60))])
    store.ingest(
        queue_b_p0, [(0, a_message("b0-0")), (1, a_message("b0-1")), (2, a_message("b0-2"))]
    )

    # When
    from_a_p0 = receive(store, clock, pk=queue_a_p0)
    from_a_p1 = receive(store, clock, pk=queue_a_p1)
    removed = store.remove(queue_b_p0, 0, clock.now_ms())

    # Then
    assert [d.message.message_id for d in from_a_p0.delivered] == ["a0-0", "a0-1"]
    assert from_a_p1.delivered == []
    assert removed is True
    assert counts(store, clock, queue_a_p0) == Counts(visible=0, in_flight=2, delayed=0)
    assert counts(store, clock, queue_a_p1) == Counts(visible=0, in_flight=0, delayed=1)
    assert counts(store, clock, queue_b_p0) == Counts(visible=2, in_flight=0, delayed=0)
    assert store.applied_offset(queue_a_p1) == 0
    assert store.applied_offset(queue_b_p0) == 2
    assert store.next_visible_at_ms(queue_a_p0, clock.now_ms()) == T0 + VISIBILITY_MS
    assert store.next_visible_at_ms(queue_a_p1, clock.now_ms()) == T0 + 60 * SECOND_MS
    assert store.next_visible_at_ms(queue_b_p0, clock.now_ms()) is None


@on_every_backend
def test_purging_or_dropping_one_partition_leaves_the_others_alone(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given three partitions with offsets 0..2 each
    purged, dropped, untouched = a_partition(1, 0), a_partition(1, 1), a_partition(2, 0)
    for pk in (purged, dropped, untouched):
        store.ingest(pk, records([0, 1, 2]))

    # When
    store.purge(purged, before_offset=2, now_ms=clock.now_ms())
    store.drop_partition(dropped)

    # Then
    assert counts(store, clock, purged) == Counts(visible=1, in_flight=0, delayed=0)
    assert counts(store, clock, dropped) == Counts()
    assert counts(store, clock, untouched) == Counts(visible=3, in_flight=0, delayed=0)
    assert offsets_of(receive(store, clock, pk=untouched)) == [0, 1, 2]
    assert store.ingest(untouched, records([1, 2, 3])) == 1


# -- backlog start (the committed consumer-group offset) ------------------------------------


@on_every_backend
def test_backlog_start_is_the_lowest_offset_not_yet_deleted(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given three messages, the first of them deleted
    store.ingest(PK, [(0, a_message("a")), (1, a_message("b")), (2, a_message("c"))])
    store.remove(PK, 0, clock.now_ms())
    # Then the backlog starts at the second
    assert store.backlog_start(PK) == 1
    # When every message is deleted, it starts after the last applied offset
    store.remove(PK, 1, clock.now_ms())
    store.remove(PK, 2, clock.now_ms())
    assert store.backlog_start(PK) == 3


@on_every_backend
def test_backlog_start_of_an_untouched_partition_is_zero(store: LeaseStore) -> None:
    assert store.backlog_start(PK) == 0


@on_every_backend
def test_backlog_start_and_oldest_sent_time_follow_every_change_made_after_a_read(
    store: LeaseStore, clock: ManualClock
) -> None:
    # (each is remembered between reads: a read after every step checks that none is stale)
    def firsts() -> tuple[int, int | None]:
        return store.backlog_start(PK), store.oldest_sent_ms(PK)

    # Given an empty partition, read
    assert firsts() == (0, None)
    # When messages arrive, one of them sent earlier than the others
    store.ingest(PK, records([0, 1, 2], sent_ms=T0 + SECOND_MS))
    assert firsts() == (0, T0 + SECOND_MS)
    store.ingest(PK, records([3], sent_ms=T0 - DAY_MS))
    assert firsts() == (0, T0 - DAY_MS)
    # When one is received (nothing leaves), then the first and the earliest sent are deleted
    receive(store, clock, max_messages=1)
    assert firsts() == (0, T0 - DAY_MS)
    store.remove(PK, 0, clock.now_ms())
    assert firsts() == (1, T0 - DAY_MS)
    store.remove(PK, 3, clock.now_ms())
    assert firsts() == (1, T0 + SECOND_MS)
    # When a purge takes the rest
    assert store.purge(PK, 4, clock.now_ms()) == 2
    assert firsts() == (4, None)
    # Then a message sent to the empty partition is its start again
    store.ingest(PK, records([4], sent_ms=T0 + DAY_MS))
    assert firsts() == (4, T0 + DAY_MS)
    # And a partition dropped (its queue deleted) starts from nothing
    store.drop_partition(PK)
    assert firsts() == (0, None)


@pytest.mark.parametrize("old_format", [None, b"2"])  # format 1 wrote no format key
@on_every_backend
def test_a_store_of_an_older_layout_loses_its_index_keys_and_serves_from_the_facts(
    kv: KeyValueStore, clock: ManualClock, old_format: bytes | None
) -> None:
    # Given a partition as formats 1 and 2 wrote it: a visible message with its entry in the
    # ready index (`R`), a delayed one with its entry in the waiting index (`V`)
    st = PartitionState(applied_offset=1, swept_until_ms=T0, visible=1, delayed=1)
    batch = WriteBatch()
    prefix = PK.prefix
    for offset, fact in ((0, state.new_fact(T0, 0)), (1, state.new_fact(T0, 60 * SECOND_MS))):
        batch.put(store_keys._fact_key(PK, offset), fact.encode())
        batch.put(store_keys._message_key(PK, offset), a_message(f"m{offset}").encode())
        batch.put(store_keys._expiry_key(PK, T0, offset), b"")
    batch.put(b"R" + prefix + (0).to_bytes(8, "big"), b"")
    batch.put(
        b"V" + prefix + (T0 + 60 * SECOND_MS).to_bytes(8, "big") + (1).to_bytes(8, "big"),
        b"\0\0\0\0",
    )
    batch.put(store_keys._state_key(PK), st.encode())
    if old_format is not None:
        batch.put(store_keys.FORMAT_KEY, old_format)
    kv.write(batch)
    store = LeaseStore(kv)

    # When
    upgraded = store.upgrade_format()

    # Then the index keys are gone, a second call is a no-op, and the messages are served
    # from their facts: the visible one now, the delayed one when its delay ends
    assert upgraded
    assert kv.scan(b"R", b"S") == [] and kv.scan(b"V", b"W") == []
    assert not store.upgrade_format()
    assert store.counts(PK, clock.now_ms()) == Counts(visible=1, delayed=1)
    assert offsets_of(receive(store, clock)) == [0]
    clock.advance(60 * SECOND_MS)  # the delay and the 30 s lease of offset 0 have ended
    assert offsets_of(receive(store, clock)) == [0, 1]


@on_every_backend
def test_a_fresh_store_is_stamped_with_the_format_and_not_reported_upgraded(
    kv: KeyValueStore,
) -> None:
    store = LeaseStore(kv)
    assert not store.upgrade_format()
    assert kv.get(store_keys.FORMAT_KEY) == str(store_keys.FORMAT_VERSION).encode()


@on_every_backend
def test_a_remove_of_a_message_already_gone_keeps_the_sweep_it_made(
    kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given a message received with a lease that has ended (its entry is due, not yet
    # swept), and another message already removed
    store = LeaseStore(kv)
    store.ingest(PK, records([0, 1]))
    receive(store, clock, max_messages=1)
    assert store.remove(PK, 1, clock.now_ms())
    clock.advance(VISIBILITY_MS)

    # When the removed one is removed again (a retried DeleteMessage), a later write commits
    # the partition state, and the store is reopened (a restart: nothing held in memory)
    assert not store.remove(PK, 1, clock.now_ms())
    store.ingest(PK, records([2], sent_ms=clock.now_ms()))
    reopened = LeaseStore(kv)

    # Then the message whose lease ended is still delivered (the crash suite lost such
    # messages: the sweep's counters reached disk without its index moves)
    assert offsets_of(receive(reopened, clock)) == [0, 2]


@on_every_backend
def test_facts_lists_every_message_held_lowest_offset_first_across_pages(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given more messages than one page of the scan, some removed, one received
    store.ingest(PK, records(range(2_500)))
    removed = {0, 999, 1_000, 1_001, 2_499}
    for offset in removed:
        assert store.remove(PK, offset, clock.now_ms())
    (held,) = receive(store, clock, max_messages=1).delivered
    store.ingest(a_partition(queue=2), records([0]))  # another queue: not listed

    # When
    facts = list(store.facts(PK))

    # Then each remaining offset once, in order, with its current fact
    assert [offset for offset, _ in facts] == [o for o in range(2_500) if o not in removed]
    assert dict(facts)[held.offset].receive_count == 1


# -- retries with the same receipt handle (issue 55) ----------------------------------------


@on_every_backend
def test_a_visibility_change_retried_with_the_same_handle_succeeds_again(
    store: LeaseStore, clock: ManualClock
) -> None:
    """A client that got no answer (or a 503) to a change that took effect retries it."""
    # Given a received message whose visibility was changed once
    store.ingest(PK, records([0]), clock.now_ms())
    (delivery,) = receive(store, clock).delivered
    epoch = delivery.fact.receive_count
    store.change_visibility(PK, 0, epoch=epoch, now_ms=clock.now_ms(), visibility_ms=60_000)
    # When the same change comes again with the same handle's epoch
    store.change_visibility(PK, 0, epoch=epoch, now_ms=clock.now_ms(), visibility_ms=60_000)
    # Then it succeeded, and the message stays hidden for that time
    clock.advance(59 * SECOND_MS)
    assert counts(store, clock).in_flight == 1
    clock.advance(2 * SECOND_MS)
    assert counts(store, clock).visible == 1
