"""A former owner's changelog records that land late never undo the next owner's work.

A gateway stopped past its membership (SIGSTOP, a stalled VM) or cut off the network can
still send fact records it noted before: librdkafka sends what it held as soon as the process
wakes, and the kernel retransmits a produce request when a cut link returns. They land after
the next owner's records. Each record's key names its writer's owner epoch
(`topology/changelog.py`), and a restore keeps each message's record of the highest epoch
(`lease_store/rebuild.py`). The crash suite's hand-over and stop cycles once delivered a
deleted message again this way: its former owner's lease, written before the stop and sent
on waking, landed after the next owner's tombstone and was restored over it.

Here the records go through the real `LeaseChangelog` and are read back by the real
`apply_changelog_record`, in log order, after the compaction Kafka would do.
"""

from __future__ import annotations

from lease_store.clock import ManualClock
from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore
from lease_store.memory import MemoryKeyValueStore
from lease_store.rebuild import LeaseRebuild, PartitionPlan
from lease_store.store import LeaseStore
from lease_store.types import Counts
from tests.support.builders import SECOND_MS, a_fact, a_partition, records
from tests.support.compacted_changelog import RETENTION_MS, Log
from topology.changelog import LeaseChangelog, epoch_of, fact_key, parse_key
from topology.rebuild import apply_changelog_record
from topology.standins import CountingFollower, InstantProducer, NullAdmin
from topology.standins import Log as StandInLog

PK = a_partition()
LEASE_MS = 600 * SECOND_MS
A_EPOCH = epoch_of(4)  # the former owner's record in `__kqs_owners` at offset 4
B_EPOCH = epoch_of(9)  # the next owner's, written after it


class TopicInOrder(CountingFollower):
    """`__kqs_leases` as the records land: (key, value) in log order."""

    def __init__(self) -> None:
        super().__init__(StandInLog())
        self.landed: list[tuple[bytes, bytes | None]] = []

    def produce(self, topic: str, value: bytes | None, key: bytes) -> None:
        self.landed.append((key, value))

    def produce_many(self, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
        self.landed.extend(records)

    def compacted(self) -> list[tuple[bytes, bytes | None]]:
        """What compaction keeps: the latest record of each key, in log order."""
        last = {key: i for i, (key, _) in enumerate(self.landed)}
        return [record for i, record in enumerate(self.landed) if last[record[0]] == i]


def owner(topic: TopicInOrder, epoch: int, kv: KeyValueStore | None = None) -> LeaseStore:
    """A gateway's lease store publishing to `topic` as the partition's owner of `epoch`."""
    stand_in = StandInLog()
    changelog = LeaseChangelog(InstantProducer(stand_in), topic, NullAdmin(stand_in))
    changelog.write_as(PK, epoch)
    return LeaseStore(kv or MemoryKeyValueStore(), changelog.on_commit)


def restored(
    landed: list[tuple[bytes, bytes | None]], log: Log, now_ms: int, kv: KeyValueStore
) -> None:
    """The partition restored into `kv` from the changelog and its queue records."""
    rebuild = LeaseRebuild(kv, [PartitionPlan(PK, RETENTION_MS)], now_ms)
    for key, value in landed:
        apply_changelog_record(rebuild, key, value)
    rebuild.replay(PK, log)
    rebuild.finish(PK, log[-1][0] + 1)


def test_a_late_lease_of_the_former_owner_does_not_bring_back_a_message_deleted_since(
    clock: ManualClock,
) -> None:
    # Given gateway A, owner in epoch A_EPOCH, which leased three messages
    topic = TopicInOrder()
    log = records(range(3))
    a_kv = MemoryKeyValueStore()
    a = owner(topic, A_EPOCH, a_kv)
    a.ingest(PK, log)
    a.receive(PK, clock.now_ms(), 3, LEASE_MS, RETENTION_MS)
    # and stalled with its change of message 1's visibility not yet sent
    late = TopicInOrder()
    owner(late, A_EPOCH, a_kv).change_visibility(PK, 1, 1, clock.now_ms(), 2 * LEASE_MS)
    # When gateway B takes the partition (a later directory record), restores it and deletes
    # message 1
    b_kv = MemoryKeyValueStore()
    restored(topic.landed, log, clock.now_ms(), b_kv)
    b = owner(topic, B_EPOCH, b_kv)
    assert b.counts(PK, clock.now_ms()) == Counts(0, 3, 0)
    assert b.remove(PK, 1, clock.now_ms())
    # and A's held record lands after B's tombstone, then the topic is compacted
    topic.landed.extend(late.landed)
    # Then a restore by the next owner, before compaction and after, has message 1 deleted
    for landed in (topic.landed, topic.compacted()):
        kv = MemoryKeyValueStore()
        restored(landed, log, clock.now_ms(), kv)
        store = LeaseStore(kv)
        assert store.fact(PK, 1) is None
        assert store.counts(PK, clock.now_ms()) == Counts(0, 2, 0)
        assert kv.scan(b"D", b"F") == []  # no rebuild-only keys left (tombstones, epochs)


def test_a_late_change_of_a_message_the_next_owner_never_touched_is_kept(
    clock: ManualClock,
) -> None:
    # Given A's lease of two messages, and its visibility change of message 0 landing after
    # B took the partition and received message 1 again once its lease ended
    topic = TopicInOrder()
    log = records(range(2))
    a_kv = MemoryKeyValueStore()
    a = owner(topic, A_EPOCH, a_kv)
    a.ingest(PK, log)
    a.receive(PK, clock.now_ms(), 2, 10 * SECOND_MS, RETENTION_MS)
    late = TopicInOrder()
    owner(late, A_EPOCH, a_kv).change_visibility(PK, 0, 1, clock.now_ms(), LEASE_MS)
    b_kv = MemoryKeyValueStore()
    restored(topic.landed, log, clock.now_ms(), b_kv)
    clock.advance(11 * SECOND_MS)
    taken = owner(topic, B_EPOCH, b_kv).receive(PK, clock.now_ms(), 2, LEASE_MS, RETENTION_MS)
    assert [d.offset for d in taken.delivered] == [0, 1]
    b_fact = LeaseStore(b_kv).fact(PK, 1)
    topic.landed.extend(late.landed)
    # When the partition is restored again
    kv = MemoryKeyValueStore()
    restored(topic.compacted(), log, clock.now_ms(), kv)
    # Then message 0 has B's lease (a higher epoch than A's late word), and message 1 too
    store = LeaseStore(kv)
    assert store.fact(PK, 0) == LeaseStore(b_kv).fact(PK, 0)
    assert store.fact(PK, 1) == b_fact


def test_one_owners_records_count_in_log_order_and_outrank_unversioned_ones(
    clock: ManualClock,
) -> None:
    # Given a legacy record (no epoch: one gateway outside the directory, or an older version)
    # then two changes by the owner of epoch B_EPOCH, and a legacy record again, late
    topic = TopicInOrder()
    log = records(range(1))
    legacy_kv = MemoryKeyValueStore()
    legacy = owner(topic, 0, legacy_kv)
    legacy.ingest(PK, log)
    legacy.receive(PK, clock.now_ms(), 1, 10 * SECOND_MS, RETENTION_MS)
    b_kv = MemoryKeyValueStore()
    restored(topic.landed, log, clock.now_ms(), b_kv)
    b = owner(topic, B_EPOCH, b_kv)
    b.change_visibility(PK, 0, 1, clock.now_ms(), LEASE_MS)
    b.change_visibility(PK, 0, 1, clock.now_ms(), 2 * LEASE_MS)
    owner(topic, 0, legacy_kv).remove(PK, 0, clock.now_ms())
    # When restored
    kv = MemoryKeyValueStore()
    restored(topic.landed, log, clock.now_ms(), kv)
    # Then the owner's latest change counts
    fact = LeaseStore(kv).fact(PK, 0)
    assert fact is not None and fact.visible_at_ms == clock.now_ms() + 2 * LEASE_MS


def test_an_interrupted_restore_leaves_no_epoch_that_counts_at_the_next(
    clock: ManualClock,
) -> None:
    # Given a restore that stopped after applying message 0's record of a high epoch
    kv = MemoryKeyValueStore()
    stopped = LeaseRebuild(kv, [PartitionPlan(PK, RETENTION_MS)], clock.now_ms(), batch_size=1)
    apply_changelog_record(stopped, fact_key(PK, 0, B_EPOCH + 100), None)
    # When the next restore reads B's lease of message 1, then A's (earlier) of message 0
    leased = a_fact(visible_at_ms=clock.now_ms() + LEASE_MS, receive_count=1)
    landed: list[tuple[bytes, bytes | None]] = [
        (fact_key(PK, 1, B_EPOCH), leased.encode()),
        (fact_key(PK, 0, A_EPOCH), leased.encode()),
    ]
    restored(landed, records(range(2)), clock.now_ms(), kv)
    # Then both leases count
    assert LeaseStore(kv).counts(PK, clock.now_ms()) == Counts(0, 2, 0)


def test_fact_keys_name_their_epoch_and_unversioned_keys_read_as_epoch_0() -> None:
    pk = PartitionKey(bytes(range(16)), 3)
    versioned = parse_key(fact_key(pk, 42, 7))
    assert versioned is not None
    assert (versioned.pk, versioned.offset, versioned.epoch) == (pk, 42, 7)
    assert fact_key(pk, 42, 7).endswith(b"/00000000000000000042/00000000000000000007")
    legacy = parse_key(fact_key(pk, 42))
    assert legacy is not None and (legacy.offset, legacy.epoch) == (42, 0)
    assert epoch_of(0) == 1  # the first directory record still outranks the unversioned key
