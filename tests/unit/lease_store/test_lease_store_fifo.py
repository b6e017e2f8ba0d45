"""The lease store's FIFO parts (`lease_store/fifo.py`), run against every backend.

The deduplication window: ingest skips a duplicate within five minutes, keeps a window entry
per scope key, forgets it after the window, and a rebuild from the queue records decides as
ingest did. Time moves only when a test advances its `ManualClock`.
"""

from __future__ import annotations

from dataclasses import replace

from lease_store import fifo
from lease_store.clock import ManualClock
from lease_store.kv import KeyValueStore
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from lease_store.types import Counts
from tests.support.builders import (
    DAY_MS,
    MINUTE_MS,
    SECOND_MS,
    T0,
    a_message,
    a_partition,
    on_every_backend,
)
from tests.support.compacted_changelog import CompactedChangelog, rebuilt
from tests.support.crash_workload_fifo import Receive, out_of_order

RETENTION_MS = 4 * DAY_MS
VISIBILITY_MS = 30 * SECOND_MS
PK = a_partition()


def a_fifo_message(
    message_id: str,
    *,
    group: str = "g1",
    dedup: str | None = None,
    scope: str = fifo.SCOPE_QUEUE,
    sent_ms: int = T0,
) -> StoredMessage:
    return replace(
        a_message(message_id, body=message_id.encode(), sent_ms=sent_ms, message_group_id=group),
        deduplication_id=dedup or f"dedup-{message_id}",
        deduplication_scope=scope,
    )


def scope_of(message: StoredMessage) -> bytes:
    key = fifo.message_scope_key(message)
    assert key is not None
    return key


# -- deduplication -----------------------------------------------------------------------------


@on_every_backend
def test_ingest_skips_a_duplicate_within_five_minutes(store: LeaseStore) -> None:
    # Given a FIFO message, and the same deduplication id sent again 4:59 later
    first = a_fifo_message("m1", dedup="d")
    again = a_fifo_message("m2", dedup="d", sent_ms=T0 + 5 * MINUTE_MS - 1)
    # When both are ingested, in one batch
    added = store.ingest(PK, [(0, first), (1, again)])
    # Then only the first is a message; the window names it, and the offset moved past both
    assert added == 1
    assert store.message(PK, 1) is None
    assert store.counts(PK, T0) == Counts(1, 0, 0)
    entry = store.deduplication_entry(PK, scope_of(first), T0 + MINUTE_MS)
    assert entry == fifo.DedupEntry(T0, 0, "m1")
    assert store.applied_offset(PK) == 1


@on_every_backend
def test_ingest_takes_the_same_id_again_after_the_window(store: LeaseStore) -> None:
    # Given a FIFO message, and its deduplication id sent again exactly five minutes later
    store.ingest(PK, [(0, a_fifo_message("m1", dedup="d"))])
    later = a_fifo_message("m2", dedup="d", sent_ms=T0 + 5 * MINUTE_MS)
    # When the second is ingested
    added = store.ingest(PK, [(1, later)])
    # Then it is a new message, and the window names it now
    assert added == 1
    assert store.deduplication_entry(PK, scope_of(later), T0 + 5 * MINUTE_MS) == (
        fifo.DedupEntry(T0 + 5 * MINUTE_MS, 1, "m2")
    )


@on_every_backend
def test_the_window_entry_outlives_a_delete_but_not_five_minutes(store: LeaseStore) -> None:
    # Given a FIFO message that was received and deleted
    message = a_fifo_message("m1")
    store.ingest(PK, [(0, message)])
    store.receive(PK, T0, 1, VISIBILITY_MS, RETENTION_MS)
    store.remove(PK, 0, T0)
    # Then its window entry stays for five minutes from its sending, no longer
    assert store.deduplication_entry(PK, scope_of(message), T0 + 5 * MINUTE_MS - 1) is not None
    assert store.deduplication_entry(PK, scope_of(message), T0 + 5 * MINUTE_MS) is None
    # and a duplicate sent meanwhile is still refused
    assert (
        store.ingest(PK, [(1, a_fifo_message("m2", sent_ms=T0 + MINUTE_MS, dedup="dedup-m1"))]) == 0
    )


@on_every_backend
def test_message_group_scope_keys_the_id_by_group(store: LeaseStore) -> None:
    # Given one deduplication id sent in two groups, with the messageGroup scope
    one = a_fifo_message("m1", group="a", dedup="d", scope=fifo.SCOPE_MESSAGE_GROUP)
    two = a_fifo_message("m2", group="b", dedup="d", scope=fifo.SCOPE_MESSAGE_GROUP)
    three = a_fifo_message("m3", group="a", dedup="d", scope=fifo.SCOPE_MESSAGE_GROUP)
    # When ingested
    added = store.ingest(PK, [(0, one), (1, two), (2, three)])
    # Then the second group's is a message of its own; the first group's repeat is not
    assert added == 2
    assert [store.message(PK, o) is not None for o in range(3)] == [True, True, False]


@on_every_backend
def test_replayed_records_keep_their_own_window_entry(store: LeaseStore) -> None:
    message = a_fifo_message("m1")
    store.ingest(PK, [(0, message)])
    # A replay of the same offset (ingest after a crash) is skipped as already applied
    assert store.ingest(PK, [(0, message)]) == 0
    assert store.message(PK, 0) == message


@on_every_backend
def test_a_message_without_deduplication_scope_is_never_a_duplicate(store: LeaseStore) -> None:
    # Given two copies moved to a dead-letter queue: the id kept, the scope dropped
    moved = replace(a_fifo_message("m1", dedup="d"), deduplication_scope=None)
    # When both are ingested
    added = store.ingest(PK, [(0, moved), (1, replace(moved, message_id="m2"))])
    # Then both are messages
    assert added == 2


@on_every_backend
def test_prune_forgets_window_entries_older_than_five_minutes(
    store: LeaseStore, kv: KeyValueStore
) -> None:
    # Given two FIFO messages, a minute apart
    store.ingest(PK, [(0, a_fifo_message("m1")), (1, a_fifo_message("m2", sent_ms=T0 + MINUTE_MS))])
    # When pruned five minutes after the first
    pruned = store.prune_deduplication(PK, T0 + 5 * MINUTE_MS)
    # Then only the first's entry (and its time index row) is gone
    assert pruned == 1
    assert len(kv.scan(b"U", b"V")) == 1
    assert len(kv.scan(b"W", b"X")) == 1
    assert store.deduplication_entry(PK, scope_of(a_fifo_message("m2")), T0 + 5 * MINUTE_MS)


@on_every_backend
def test_drop_partition_forgets_the_window(store: LeaseStore, kv: KeyValueStore) -> None:
    store.ingest(PK, [(0, a_fifo_message("m1"))])
    store.drop_partition(PK)
    assert kv.scan(b"U", b"X") == []


@on_every_backend
def test_rebuild_skips_the_duplicates_ingest_skipped_and_keeps_the_window(
    kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given a log with a duplicate that reached it (offset 1), the original deleted since
    changelog = CompactedChangelog()
    original = LeaseStore(MemoryKeyValueStore(), changelog.on_commit)
    log = [
        (0, a_fifo_message("m1", dedup="d")),
        (1, a_fifo_message("m2", dedup="d", sent_ms=T0 + SECOND_MS)),
        (2, a_fifo_message("m3")),
    ]
    original.ingest(PK, log)
    original.receive(PK, clock.now_ms(), 1, VISIBILITY_MS, RETENTION_MS)
    original.remove(PK, 0, clock.now_ms())
    clock.advance(MINUTE_MS)
    # When the store is rebuilt from the changelog and the queue records
    store = rebuilt(kv, changelog, {PK: log}, clock.now_ms())
    # Then the duplicate is not a message, and the window still refuses the id
    assert store.message(PK, 1) is None
    assert store.counts(PK, clock.now_ms()) == Counts(1, 0, 0)
    entry = store.deduplication_entry(PK, scope_of(log[0][1]), clock.now_ms())
    assert entry == fifo.DedupEntry(T0, 0, "m1")
    assert store.ingest(PK, [(3, a_fifo_message("m4", dedup="d", sent_ms=clock.now_ms()))]) == 0


def test_sequence_numbers_are_offsets_in_twenty_digits() -> None:
    assert fifo.sequence_number(42) == "00000000000000000042"
    assert fifo.sequence_number(7) < fifo.sequence_number(42) < fifo.sequence_number(100)


def test_content_deduplication_id_is_the_sha256_of_the_body() -> None:
    assert fifo.content_deduplication_id(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_stored_message_keeps_its_deduplication_fields() -> None:
    message = a_fifo_message("m1", scope=fifo.SCOPE_MESSAGE_GROUP)
    assert StoredMessage.decode(message.encode()) == message


# -- receiving: message groups in order, one consumer at a time ------------------------------


def grouped(*groups: str) -> list[tuple[int, StoredMessage]]:
    """Records at offsets 0.., the n-th in group `groups[n]`, named `<group><k>` in order."""
    seen: dict[str, int] = {}
    out = []
    for offset, group in enumerate(groups):
        seen[group] = seen.get(group, 0) + 1
        out.append((offset, a_fifo_message(f"{group}{seen[group]}", group=group)))
    return out


def receive_fifo(
    store: LeaseStore,
    clock: ManualClock,
    max_messages: int = 10,
    visibility_ms: int = VISIBILITY_MS,
    max_receive_count: int | None = None,
) -> list[str]:
    outcome = store.receive_fifo(
        PK, clock.now_ms(), max_messages, visibility_ms, RETENTION_MS, max_receive_count
    )
    return [d.message.message_id for d in outcome.delivered]


@on_every_backend
def test_nothing_later_from_a_group_while_one_of_its_messages_is_in_flight(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given groups a and b interleaved
    store.ingest(PK, grouped("a", "a", "b", "a", "b"))
    # When one message is received, then the rest
    first = receive_fifo(store, clock, max_messages=1)
    rest = receive_fifo(store, clock)
    # Then the first is a1, and while it is in flight only group b comes, in order
    assert first == ["a1"]
    assert rest == ["b1", "b2"]
    assert receive_fifo(store, clock) == []
    # and once a1 is deleted, the rest of a comes in order
    store.remove(PK, 0, clock.now_ms())
    assert receive_fifo(store, clock) == ["a2", "a3"]
    assert store.counts(PK, clock.now_ms()) == Counts(0, 4, 0)


@on_every_backend
def test_one_receive_takes_a_group_before_the_next(store: LeaseStore, clock: ManualClock) -> None:
    store.ingest(PK, grouped("a", "b", "a", "b", "c"))
    assert receive_fifo(store, clock, max_messages=3) == ["a1", "a2", "b1"]
    assert receive_fifo(store, clock, max_messages=3) == ["c1"]


@on_every_backend
def test_a_group_comes_back_in_order_when_its_lease_ends(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a1 and a2 received together, then a1 deleted and a2's lease over
    store.ingest(PK, grouped("a", "a", "a"))
    assert receive_fifo(store, clock, max_messages=2) == ["a1", "a2"]
    store.remove(PK, 0, clock.now_ms())
    assert receive_fifo(store, clock) == []
    clock.advance(VISIBILITY_MS)
    # When received again
    outcome = store.receive_fifo(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS)
    # Then a2 comes again (its second receive), before a3
    assert [(d.message.message_id, d.fact.receive_count) for d in outcome.delivered] == [
        ("a2", 2),
        ("a3", 1),
    ]


@on_every_backend
def test_a_visible_message_waits_while_an_earlier_one_of_its_group_is_in_flight(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a1 and a2 received, and a2 made visible again at once
    store.ingest(PK, grouped("a", "a"))
    receive_fifo(store, clock)
    store.change_visibility(PK, 1, 1, clock.now_ms(), 0)
    # Then a2 is not received while a1 is in flight
    assert receive_fifo(store, clock) == []
    # and is once a1 is deleted
    store.remove(PK, 0, clock.now_ms())
    assert receive_fifo(store, clock) == ["a2"]


@on_every_backend
def test_a_lease_extended_past_its_first_timeout_keeps_the_group_locked(
    store: LeaseStore, clock: ManualClock
) -> None:
    store.ingest(PK, grouped("a", "a"))
    receive_fifo(store, clock, max_messages=1)
    store.change_visibility(PK, 0, 1, clock.now_ms(), 10 * VISIBILITY_MS)
    clock.advance(2 * VISIBILITY_MS)
    assert receive_fifo(store, clock) == []


@on_every_backend
def test_visibility_timeout_zero_leaves_the_group_free(
    store: LeaseStore, clock: ManualClock
) -> None:
    store.ingest(PK, grouped("a", "a"))
    assert receive_fifo(store, clock, visibility_ms=0) == ["a1", "a2"]
    assert receive_fifo(store, clock, visibility_ms=0) == ["a1", "a2"]


@on_every_backend
def test_a_dead_letter_hold_keeps_the_rest_of_its_group_waiting(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a1 received once and its lease over, with maxReceiveCount 1
    store.ingest(PK, grouped("a", "a", "b"))
    assert receive_fifo(store, clock, max_messages=1) == ["a1"]
    clock.advance(VISIBILITY_MS)
    # When received again
    outcome = store.receive_fifo(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS, 1)
    # Then a1 is held for the dead-letter move, a2 waits, and b1 comes
    assert [d.message.message_id for d in outcome.dead_letter] == ["a1"]
    assert [d.message.message_id for d in outcome.delivered] == ["b1"]
    assert receive_fifo(store, clock, max_receive_count=1) == []
    # and once the move removed a1, a2 comes
    store.remove(PK, 0, clock.now_ms())
    assert receive_fifo(store, clock, max_receive_count=1) == ["a2"]


@on_every_backend
def test_fifo_receive_drops_expired_messages(store: LeaseStore, clock: ManualClock) -> None:
    store.ingest(PK, grouped("a", "a"))
    clock.advance(RETENTION_MS)
    outcome = store.receive_fifo(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS)
    assert outcome.delivered == [] and outcome.expired_ids == ["a1", "a2"]
    assert store.counts(PK, clock.now_ms()) == Counts(0, 0, 0)


@on_every_backend
def test_a_released_group_lock_is_forgotten(
    store: LeaseStore, clock: ManualClock, kv: KeyValueStore
) -> None:
    # Given a group whose only message was received and deleted
    store.ingest(PK, grouped("a", "b"))
    receive_fifo(store, clock, max_messages=1)
    assert len(kv.scan(b"G", b"H")) == 1
    store.remove(PK, 0, clock.now_ms())
    # When the next receive takes another group's message, and the locks are pruned
    assert receive_fifo(store, clock) == ["b1"]
    assert store.prune_group_locks(PK, clock.now_ms()) == 1
    # Then only b's lock is left
    assert [key[-1:] for key, _ in kv.scan(b"G", b"H")] == [b"b"]
    # and b's goes once its lease is over
    clock.advance(VISIBILITY_MS)
    assert store.prune_group_locks(PK, clock.now_ms()) == 1
    assert kv.scan(b"G", b"H") == []


@on_every_backend
def test_standard_receive_ignores_message_groups(store: LeaseStore, clock: ManualClock) -> None:
    store.ingest(PK, grouped("a", "a", "b"))
    outcome = store.receive(PK, clock.now_ms(), 1, VISIBILITY_MS, RETENTION_MS)
    assert [d.message.message_id for d in outcome.delivered] == ["a1"]
    outcome = store.receive(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS)
    assert [d.message.message_id for d in outcome.delivered] == ["a2", "b1"]


# -- the crash suite's order check (tests/support/crash_workload_fifo.py) -----------------------------


def test_crash_order_check_accepts_redeliveries_together_and_flags_a_skip() -> None:
    # g-1 and g-2 received together, both redelivered together later, then g-3: in order
    fine = [
        Receive("q", 0.0, 1.0, ("g-1", "g-2")),
        Receive("q", 2.0, 3.0, ("g-1", "g-2")),
        Receive("q", 4.0, 5.0, ("g-3",)),
    ]
    assert out_of_order(fine) == []
    # g-2 delivered alone, g-1 after it; and g-4 before g-3 within one receive
    assert out_of_order([Receive("q", 0.0, 1.0, ("g-2",)), Receive("q", 2.0, 3.0, ("g-1",))]) == [
        "g: 1 delivered after 2 had been"
    ]
    assert out_of_order([Receive("q", 0.0, 1.0, ("g-4", "g-3"))]) == [
        "g: one receive returned [4, 3]"
    ]


@on_every_backend
def test_rebuild_keeps_a_group_locked_while_its_message_is_in_flight(
    kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given a1 in flight and a2 waiting behind it, and b1 free
    changelog = CompactedChangelog()
    original = LeaseStore(MemoryKeyValueStore(), changelog.on_commit)
    log = grouped("a", "a", "b")
    original.ingest(PK, log)
    assert original.receive_fifo(PK, clock.now_ms(), 1, VISIBILITY_MS, RETENTION_MS).delivered
    # When the store is rebuilt from the changelog and the queue records
    store = rebuilt(kv, changelog, {PK: log}, clock.now_ms())
    # Then a stays locked until a1's lease ends; b comes
    assert receive_fifo(store, clock) == ["b1"]
    clock.advance(VISIBILITY_MS)
    assert receive_fifo(store, clock) == ["a1", "a2", "b1"]


@on_every_backend
def test_a_locked_groups_long_backlog_is_skipped_page_by_page(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given 600 messages of group a ahead of one of group b, and a's head in flight
    store.ingest(PK, grouped(*["a"] * 600, "b"))
    assert receive_fifo(store, clock, max_messages=1) == ["a1"]
    # When received again, twice (the second time from the scanned groups kept in memory)
    first = receive_fifo(store, clock)
    store.ingest(PK, [(601, a_fifo_message("c1", group="c"))])
    second = receive_fifo(store, clock)
    # Then b's message, then c's, are found behind a's backlog
    assert first == ["b1"]
    assert second == ["c1"]
    # and a scan limit below the backlog leaves them unseen (the documented bound)
    store.ingest(PK, [(602, a_fifo_message("d1", group="d"))])
    limited = store.receive_fifo(
        PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS, scan_limit=500
    )
    assert limited.delivered == []
    assert receive_fifo(store, clock) == ["d1"]


# -- fair standard queues: groups take turns -------------------------------------------------


def receive_fair(store: LeaseStore, clock: ManualClock, max_messages: int = 10) -> list[str]:
    outcome = store.receive_fair(PK, clock.now_ms(), max_messages, VISIBILITY_MS, RETENTION_MS)
    return [d.message.message_id for d in outcome.delivered]


@on_every_backend
def test_fair_receive_serves_a_quiet_group_before_a_floods_backlog(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given 500 messages of a flooding group ahead of one of a quiet group
    store.ingest(PK, grouped(*["noisy"] * 500, "quiet"))
    # When a fair receive takes 3
    taken = receive_fair(store, clock, 3)
    # Then the quiet group's message is among them, groups taking turns in log order
    assert taken == ["noisy1", "quiet1", "noisy2"]
    # and nothing is locked: the flood goes on being served
    assert receive_fair(store, clock, 2) == ["noisy3", "noisy4"]
    assert store.counts(PK, clock.now_ms()) == Counts(496, 5, 0)


@on_every_backend
def test_fair_receive_moves_dead_letters_and_drops_expired(
    store: LeaseStore, clock: ManualClock
) -> None:
    store.ingest(PK, grouped("a", "b"))
    assert receive_fair(store, clock) == ["a1", "b1"]
    clock.advance(VISIBILITY_MS)
    outcome = store.receive_fair(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS, 1)
    assert [d.message.message_id for d in outcome.dead_letter] == ["a1", "b1"]
    clock.advance(RETENTION_MS)
    outcome = store.receive_fair(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS)
    assert outcome.expired_ids == ["a1", "b1"] and outcome.delivered == []


@on_every_backend
def test_a_fifo_hold_skips_locked_groups_and_locks_what_it_holds(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given a1 in flight (a consumer holds group a), a2 behind it, and b1, b2 free
    store.ingest(PK, grouped("a", "a", "b", "b"))
    assert receive_fifo(store, clock, max_messages=1) == ["a1"]
    # When a move task holds what it may
    outcome = store.receive_fifo(PK, clock.now_ms(), 10, 0, RETENTION_MS, hold_ms=10 * SECOND_MS)
    # Then it holds group b in order, not a2, without counting a receive
    assert [(d.message.message_id, d.fact.receive_count) for d in outcome.delivered] == [
        ("b1", 0),
        ("b2", 0),
    ]
    # and while held, group b is locked to consumers
    assert receive_fifo(store, clock) == []
    assert store.counts(PK, clock.now_ms()) == Counts(1, 1, 2)
