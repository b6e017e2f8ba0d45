"""What a single gateway's store hands over to the changelog (`gateway/cluster/hand_over.py`): every
fact it holds and a tombstone for every offset it no longer holds, between the partition's
log start and its applied offset (no Kafka: the follower is a recorder)."""

from __future__ import annotations

from typing import cast

from gateway.cluster.hand_over import publish_partition
from lease_store import notes
from lease_store.clock import ManualClock
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import LeaseFact
from lease_store.store import LeaseStore
from tests.support.builders import T0, a_partition, records
from topology.changelog import fact_key, note_key
from topology.follower_producer import FollowerProducer
from topology.names import LEASES_TOPIC

PK = a_partition()


class Recorder:
    def __init__(self) -> None:
        self.records: dict[bytes, bytes | None] = {}

    def produce(self, topic: str, value: bytes | None, key: bytes) -> None:
        assert topic == LEASES_TOPIC
        assert key not in self.records, "each key once"
        self.records[key] = value


def test_facts_are_published_and_every_offset_gone_is_a_tombstone() -> None:
    # Given a partition whose log starts at 2 (0 and 1 expired from the topic), with 2..9
    # applied, 3 and 7 deleted, 5 received, and 10..11 in the log but not applied yet
    clock = ManualClock(T0)
    store = LeaseStore(MemoryKeyValueStore())
    store.ingest(PK, records(range(2, 10)))
    for offset in (3, 7):
        assert store.remove(PK, offset, clock.now_ms())
    received = store.receive(
        PK, clock.now_ms(), max_messages=4, visibility_ms=30_000, retention_ms=10**9
    ).delivered
    follower = Recorder()

    # When
    published = publish_partition(store, PK, 2, cast(FollowerProducer, follower))

    # Then every held message has its current fact, the deleted ones a tombstone, and
    # nothing is said of offsets outside [log start, applied]
    assert published == len(follower.records) == 8
    tombstones = {k for k, v in follower.records.items() if v is None}
    assert tombstones == {fact_key(PK, 3), fact_key(PK, 7)}
    for delivery in received:
        raw = follower.records[fact_key(PK, delivery.offset)]
        assert raw is not None and LeaseFact.decode(raw).receive_count == 1
    assert fact_key(PK, 1) not in follower.records
    assert fact_key(PK, 10) not in follower.records


def test_a_partition_emptied_entirely_is_all_tombstones() -> None:
    clock = ManualClock(T0)
    store = LeaseStore(MemoryKeyValueStore())
    store.ingest(PK, records(range(4)))
    for offset in range(4):
        assert store.remove(PK, offset, clock.now_ms())
    follower = Recorder()

    assert publish_partition(store, PK, 0, cast(FollowerProducer, follower)) == 4
    assert follower.records == {fact_key(PK, o): None for o in range(4)}


def test_young_messages_deleted_before_a_crash_are_tombstones_and_the_live_ones_untouched() -> None:
    # Given a gateway that held four young messages, deleted the second and died
    clock = ManualClock(T0)
    kv = MemoryKeyValueStore()
    store = LeaseStore(kv, young_ms=1_000)
    store.ingest(PK, records(range(4)), clock.now_ms())
    store.receive(PK, clock.now_ms(), max_messages=4, visibility_ms=30_000, retention_ms=10**9)
    store.remove_many(PK, [1], clock.now_ms())
    store.sync()
    follower = Recorder()

    # When its store, as the crash left it, is handed over
    published = publish_partition(LeaseStore(kv), PK, 0, cast(FollowerProducer, follower))

    # Then the deleted one is a tombstone, and nothing is said of the live ones (a restore
    # takes them from the queue topic as never received: their leases went with the crash)
    assert (published, follower.records) == (1, {fact_key(PK, 1): None})


def test_notes_are_published_as_changelog_notes() -> None:
    # Given a FIFO claim and a receive attempt noted in the store
    store = LeaseStore(MemoryKeyValueStore())
    store.ingest(PK, records(range(1)))
    claim = store.write_note(PK, notes.KIND_CLAIM, b"dedup-1", T0, b"claimed", sync=False)
    attempt = store.write_note(PK, notes.KIND_ATTEMPT, b"attempt/1", T0, b"got", sync=False)
    follower = Recorder()

    # When the store is handed over
    publish_partition(store, PK, 0, cast(FollowerProducer, follower))

    # Then both are in the changelog as the gateway publishes notes, which a restore reads
    assert follower.records[note_key(PK, notes.KIND_CLAIM, b"dedup-1")] == claim
    assert follower.records[note_key(PK, notes.KIND_ATTEMPT, b"attempt/1")] == attempt
