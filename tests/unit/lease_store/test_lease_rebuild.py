"""The lease changelog's change reports and the rebuild of a lost lease store (no Kafka here).

A recording listener stands in for `__kqs_leases`: it keeps the latest value per key, as
compaction would. A rebuild from that and the queue records must give back the same store.
"""

from __future__ import annotations

from lease_store.clock import ManualClock
from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import LeaseFact
from lease_store.store import LeaseStore
from lease_store.types import Counts, PartitionState
from tests.support.builders import (
    DAY_MS,
    SECOND_MS,
    T0,
    a_fact,
    a_partition,
    on_every_backend,
    records,
)
from tests.support.compacted_changelog import RETENTION_MS, CompactedChangelog, rebuilt
from topology.changelog import encode_state, fact_key, parse_key, purge_watermark, state_key

PK = a_partition()
OTHER = a_partition(queue=2)


def facts(store: LeaseStore, pk: PartitionKey, offsets: range) -> dict[int, LeaseFact]:
    return {o: f for o in offsets if (f := store.fact(pk, o)) is not None}


def test_ingest_reports_nothing_and_receive_and_delete_report_their_facts(
    clock: ManualClock,
) -> None:
    # Given a store with a listener
    changelog = CompactedChangelog()
    store = LeaseStore(MemoryKeyValueStore(), changelog.on_commit)
    # When messages are ingested, one is received and another deleted
    store.ingest(PK, records(range(3)))
    received = store.receive(PK, clock.now_ms(), 1, 30 * SECOND_MS, RETENTION_MS).delivered[0]
    store.remove(PK, 2, clock.now_ms())
    # Then only the receive and the delete were reported
    reported = [changes for _, changes in changelog.commits if changes]
    assert reported == [{received.offset: received.fact}, {2: None}]


def test_purge_reports_its_watermark_but_not_each_dropped_fact(clock: ManualClock) -> None:
    # Given three received messages
    changelog = CompactedChangelog()
    store = LeaseStore(MemoryKeyValueStore(), changelog.on_commit)
    store.ingest(PK, records(range(3)))
    store.receive(PK, clock.now_ms(), 3, 30 * SECOND_MS, RETENTION_MS)
    changelog.commits.clear()
    # When the partition is purged
    store.purge(PK, 3, clock.now_ms())
    # Then no per-message change is reported, and the watermark is in the state
    assert all(not changes for _, changes in changelog.commits)
    assert changelog.latest[(PK, None)] == 3


@on_every_backend
def test_rebuild_gives_back_facts_messages_and_exact_counts(
    kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given a store through receives, a visibility change, a delete and a second receive
    changelog = CompactedChangelog()
    original = LeaseStore(MemoryKeyValueStore(), changelog.on_commit)
    log = records(range(6))
    original.ingest(PK, log[:5])
    original.ingest(OTHER, records(range(2)))
    now = clock.now_ms
    first = original.receive(PK, now(), 2, 600 * SECOND_MS, RETENTION_MS).delivered
    original.remove(PK, first[0].offset, now())
    again = original.receive(PK, now(), 1, 0, RETENTION_MS).delivered[0]
    clock.advance(SECOND_MS)
    original.receive(PK, now(), 1, 0, RETENTION_MS)
    original.change_visibility(PK, first[1].offset, 1, now(), 900 * SECOND_MS)
    original.ingest(PK, log[5:])  # one more record, never touched
    clock.advance(SECOND_MS)
    # When the store is lost and rebuilt from the changelog and the queue records
    store = rebuilt(kv, changelog, {PK: log, OTHER: records(range(2))}, now())
    # Then every fact, message, counter and applied offset is as before
    assert facts(store, PK, range(6)) == facts(original, PK, range(6))
    assert first[0].offset not in facts(store, PK, range(6))
    assert store.fact(PK, again.offset) == original.fact(PK, again.offset)
    assert store.message(PK, 5) == log[5][1]
    assert store.counts(PK, now()) == original.counts(PK, now()) == Counts(4, 1, 0)
    assert store.counts(OTHER, now()) == Counts(2, 0, 0)
    assert store.applied_offset(PK) == 5
    # and receiving from it takes only what was visible, keeping the receive counts
    taken = store.receive(PK, now(), 10, 30 * SECOND_MS, RETENTION_MS).delivered
    assert sorted(d.offset for d in taken) == [2, 3, 4, 5] != []
    assert {d.offset: d.fact.receive_count for d in taken}[again.offset] == 3


def test_rebuild_drops_purged_offsets_and_expired_messages(clock: ManualClock) -> None:
    # Given records 0-1 purged, 2 received, and 3-4 sent long ago
    changelog = CompactedChangelog()
    original = LeaseStore(MemoryKeyValueStore(), changelog.on_commit)
    log = records(range(3)) + records(range(3, 5), sent_ms=T0 - RETENTION_MS)
    original.ingest(PK, log)
    original.receive(PK, clock.now_ms(), 5, 30 * SECOND_MS, RETENTION_MS)
    original.purge(PK, 2, clock.now_ms())
    # When rebuilt
    store = rebuilt(MemoryKeyValueStore(), changelog, {PK: log}, clock.now_ms())
    # Then only the live, unexpired message is there, and the watermark holds
    assert list(facts(store, PK, range(5))) == [2]
    assert store.counts(PK, clock.now_ms()) == Counts(0, 1, 0)
    store.ingest(PK, records(range(2)))
    assert list(facts(store, PK, range(5))) == [2]


def test_rebuild_forgets_changes_of_offsets_the_log_no_longer_holds(clock: ManualClock) -> None:
    # Given changelog facts for offsets 0-3, but the log now starts at 2 and lacks 3
    changelog = CompactedChangelog()
    for offset in range(4):
        changelog.latest[(PK, offset)] = a_fact(visible_at_ms=T0 + DAY_MS, receive_count=1)
    log = [r for r in records(range(2, 5)) if r[0] != 3]
    kv = MemoryKeyValueStore()
    # When rebuilt
    store = rebuilt(kv, changelog, {PK: log}, clock.now_ms(), log_start=2)
    # Then the facts of offsets the log lacks are gone, with no rebuild-only keys left
    assert list(facts(store, PK, range(5))) == [2, 4]
    assert store.counts(PK, clock.now_ms()) == Counts(1, 1, 0)
    assert kv.scan(b"D", b"E") == []


def test_changelog_keys_name_one_message_or_the_partition_state() -> None:
    assert fact_key(PK, 42) == (PK.incarnation.hex() + "/00000/00000000000000000042").encode()
    assert parse_key(fact_key(PK, 42)) is not None
    parsed = parse_key(fact_key(PK, 42))
    assert parsed is not None and (parsed.pk, parsed.offset) == (PK, 42)
    parsed_state = parse_key(state_key(PK))
    assert parsed_state is not None and parsed_state.offset is None
    assert parse_key(b"not a key") is None
    st = PartitionState(applied_offset=9, purged_before_offset=7)
    assert purge_watermark(encode_state(st)) == 7
