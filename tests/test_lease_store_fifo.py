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
from lease_store.store import Counts, LeaseStore
from tests.builders import (
    DAY_MS,
    MINUTE_MS,
    SECOND_MS,
    T0,
    a_message,
    a_partition,
    on_every_backend,
)
from tests.test_lease_rebuild import CompactedChangelog, rebuilt

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
