"""Young messages (`lease_store/young.py`), on every `KeyValueStore` backend: a message that
lives and dies within `young_ms` costs the store no key of its own, and a crash replays the
young ones from Kafka without bringing back one whose delete was acknowledged.

A "crash" here is a new `LeaseStore` on the same key-value store, with nothing flushed or
closed: what the store had written is all that is left, as after a SIGKILL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lease_store.clock import ManualClock
from lease_store.kv import KeyValueStore
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
from lease_store.young import Young, YoungMessages
from tests.support.builders import (
    SECOND_MS,
    a_fact,
    a_message,
    a_partition,
    on_every_backend,
    records,
)

YOUNG_MS = 1_000
VISIBILITY_MS = 30 * SECOND_MS
RETENTION_MS = 4 * 24 * 3600 * SECOND_MS
PK = a_partition()


@pytest.fixture
def young(kv: KeyValueStore) -> LeaseStore:
    return LeaseStore(kv, young_ms=YOUNG_MS)


def keys(kv: KeyValueStore, tag: bytes) -> list[bytes]:
    return [key for key, _ in kv.scan(tag + PK.prefix, tag + PK.prefix + b"\xff" * 24)]


def receive_all(store: LeaseStore, clock: ManualClock) -> list[int]:
    outcome = store.receive(PK, clock.now_ms(), 10, VISIBILITY_MS, RETENTION_MS)
    return [delivery.offset for delivery in outcome.delivered]


def crash(kv: KeyValueStore) -> LeaseStore:
    return LeaseStore(kv, young_ms=YOUNG_MS)


@on_every_backend
def test_a_message_received_and_deleted_young_leaves_no_key_behind(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given three messages ingested, received and deleted within their young time
    young.ingest(PK, records(range(3)), clock.now_ms())
    assert receive_all(young, clock) == [0, 1, 2]
    removed = young.remove_many(PK, [0, 1, 2], clock.now_ms())
    young.sync()

    # Then nothing of them was written, and the state on disk says all three are applied
    assert sorted(removed) == [0, 1, 2]
    assert [keys(kv, tag) for tag in (b"F", b"M", b"X", b"D")] == [[], [], [], []]
    assert crash(kv).applied_offset(PK) == 2


@on_every_backend
def test_a_crash_replays_the_young_messages_but_not_the_deleted_ones(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given five young messages, all received, two of them deleted (acknowledged: synced)
    young.ingest(PK, records(range(5)), clock.now_ms())
    assert receive_all(young, clock) == [0, 1, 2, 3, 4]
    young.remove_many(PK, [1, 3], clock.now_ms())
    young.sync()

    # When the gateway dies and ingest reads the partition again from its applied offset
    reopened = crash(kv)
    replay_from = reopened.applied_offset(PK) + 1
    reopened.ingest(PK, records(range(replay_from, 5)), clock.now_ms())

    # Then the live ones are back (their receive lost: delivered again), the deleted are not
    assert replay_from == 0
    assert receive_all(reopened, clock) == [0, 2, 4]
    assert reopened.applied_offset(PK) == 4


@on_every_backend
def test_young_messages_are_written_once_they_have_lived_their_time(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given three young messages, one of them received
    young.ingest(PK, records(range(3)), clock.now_ms())
    young.receive(PK, clock.now_ms(), 1, VISIBILITY_MS, RETENTION_MS)

    # When the periodic write runs just before and at their time
    before = young.flush_young(clock.now_ms() + YOUNG_MS - 1)
    at = young.flush_young(clock.now_ms() + YOUNG_MS)

    # Then they are written then, as ingest writes a message, with the lease as it stands
    assert (before, at) == (0, 3)
    assert len(keys(kv, b"F")) == len(keys(kv, b"M")) == len(keys(kv, b"X")) == 3
    reopened = crash(kv)
    assert reopened.applied_offset(PK) == 2
    counts = reopened.counts(PK, clock.now_ms())
    assert (counts.visible, counts.in_flight) == (2, 1)


@on_every_backend
def test_deletion_markers_go_once_the_applied_offset_on_disk_passes_them(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given three young messages: the middle one deleted (a marker: the first is still
    # young below it), then the first (no marker: nothing young is left below it)
    young.ingest(PK, records(range(3)), clock.now_ms())
    receive_all(young, clock)
    young.remove_many(PK, [1], clock.now_ms())
    marked = len(keys(kv, b"D"))
    young.remove_many(PK, [0], clock.now_ms())

    # When the periodic write runs (nothing is due yet)
    written = young.flush_young(clock.now_ms())

    # Then the marker went, since the applied offset on disk has passed it
    assert (marked, written) == (1, 0)
    assert keys(kv, b"D") == []
    assert crash(kv).applied_offset(PK) == 1


@on_every_backend
def test_a_visibility_change_of_a_young_message_survives_a_crash(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given two young messages received, and the second's visibility changed (synced)
    young.ingest(PK, records(range(2)), clock.now_ms())
    receive_all(young, clock)
    changed = young.change_visibility(PK, 1, 1, clock.now_ms(), 5 * SECOND_MS)

    # When the gateway dies
    reopened = crash(kv)

    # Then nothing needs replaying, and the change holds
    assert reopened.applied_offset(PK) == 1
    assert reopened.fact(PK, 1) == changed
    assert changed.visible_at_ms == clock.now_ms() + 5 * SECOND_MS


@on_every_backend
def test_a_grouped_message_is_written_at_ingest(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # When a message with a group (a FIFO or fair queue's) is ingested
    young.ingest(PK, [(0, a_message("m", message_group_id="g"))], clock.now_ms())

    # Then it is written at once: its group's order and lock are read from the store
    assert len(keys(kv, b"F")) == 1
    assert crash(kv).applied_offset(PK) == 0


@on_every_backend
def test_young_messages_count_in_the_backlog_start_and_the_oldest_age(
    young: LeaseStore, clock: ManualClock
) -> None:
    # Given two young messages, sent a second apart
    young.ingest(PK, [(0, a_message("a", sent_ms=clock.now_ms() - SECOND_MS))], clock.now_ms())
    young.ingest(PK, [(1, a_message("b", sent_ms=clock.now_ms()))], clock.now_ms())

    # Then the backlog starts at the first, and the oldest is its send
    assert young.backlog_start(PK) == 0
    assert young.oldest_sent_ms(PK) == clock.now_ms() - SECOND_MS


@on_every_backend
def test_purge_and_drop_partition_take_young_messages_too(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given four young messages
    young.ingest(PK, records(range(4)), clock.now_ms())

    # When the first two are purged and then the partition dropped
    purged = young.purge(PK, 2, clock.now_ms())
    visible_after_purge = young.counts(PK, clock.now_ms()).visible
    dropped = young.drop_partition(PK)

    # Then
    assert (purged, visible_after_purge, dropped) == (2, 2, [2, 3])
    assert [keys(kv, tag) for tag in (b"F", b"M", b"X", b"D", b"S")] == [[], [], [], [], []]


def test_closing_writes_the_young_messages(tmp_path: Path, clock: ManualClock) -> None:
    # Given two young messages in a RocksDB store, one received
    store = LeaseStore(RocksKeyValueStore(tmp_path / "kv"), young_ms=YOUNG_MS)
    store.ingest(PK, records(range(2)), clock.now_ms())
    store.receive(PK, clock.now_ms(), 1, VISIBILITY_MS, RETENTION_MS)

    # When the store closes and is opened again
    store.close()
    reopened = LeaseStore(RocksKeyValueStore(tmp_path / "kv"), young_ms=YOUNG_MS)

    # Then both were written: nothing is left to replay, the lease held
    assert len(keys(reopened.kv, b"F")) == 2
    assert reopened.applied_offset(PK) == 1
    assert reopened.counts(PK, clock.now_ms()).in_flight == 1
    reopened.close()


def test_too_many_young_bytes_are_written_whatever_their_age(clock: ManualClock) -> None:
    # Given a bound of 3 KB of young messages and four 1 KB bodies held at once
    young = YoungMessages[str](max_age_ms=YOUNG_MS, max_bytes=3 * 1024)
    for offset in range(4):
        message = a_message(f"m{offset}", body=b"x" * 1024)
        young.add("p", offset, Young(message, a_fact(), clock.now_ms()))

    # When the periodic write looks, none of them old enough
    due = young.due(clock.now_ms())
    taken = [offset for offset, _ in young.take_due("p", clock.now_ms())]

    # Then all are written, and the count and bytes held go back to none
    assert (due, taken, young.count, young.bytes) == (["p"], [0, 1, 2, 3], 0, 0)


@on_every_backend
def test_a_delete_that_comes_back_before_the_replay_is_not_undone_by_it(
    young: LeaseStore, kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given three young messages received, and a crash before anything was written
    young.ingest(PK, records(range(3)), clock.now_ms())
    receive_all(young, clock)
    reopened = crash(kv)

    # When a consumer deletes the second with its handle before ingest has read it again
    removed = reopened.remove_many(PK, [1], clock.now_ms())
    reopened.sync()
    single = reopened.remove(PK, 2, clock.now_ms())
    reopened.ingest(PK, records(range(3)), clock.now_ms())

    # Then the replay skips both: deleted as answered (nothing to report of them)
    assert (removed, single) == ({}, False)
    assert receive_all(reopened, clock) == [0]


@on_every_backend
def test_a_young_message_past_its_retention_is_dropped_and_not_counted(
    young: LeaseStore, clock: ManualClock
) -> None:
    # Given a young message sent (by its timestamp) longer ago than the retention period
    young.ingest(PK, [(0, a_message("old", sent_ms=clock.now_ms() - 2 * 60_000))], clock.now_ms())

    # When expiry runs with a one-minute retention
    dropped = young.expire_ids(PK, clock.now_ms(), 60_000)

    # Then it is dropped and no longer counted
    assert dropped == ["old"]
    assert young.counts(PK, clock.now_ms()).visible == 0


@on_every_backend
def test_the_backlog_start_holds_after_young_messages_are_written(
    young: LeaseStore, clock: ManualClock
) -> None:
    # Given the backlog start read while two messages were young, then their write
    young.ingest(PK, records(range(2)), clock.now_ms())
    first = young.backlog_start(PK)
    young.flush_young(clock.now_ms() + YOUNG_MS)

    # Then it still starts at the first message
    assert (first, young.backlog_start(PK)) == (0, 0)
