"""A partition's notes (`lease_store/notes.py`: FIFO deduplication claims, receive attempts)
and its fair flag (`PartitionState.grouped`): kept across a reopen of the store, restored by
a rebuild from the changelog and the queue records, pruned after their window; on every
backend."""

from __future__ import annotations

from dataclasses import replace

from lease_store import fifo, notes
from lease_store.fifo_claims import Claim, claim_partition, fingerprint
from lease_store.kv import KeyValueStore
from lease_store.memory import MemoryKeyValueStore
from lease_store.rebuild import LeaseRebuild, PartitionPlan
from lease_store.store import LeaseStore
from tests.support.builders import DAY_MS, MINUTE_MS, T0, a_message, a_partition, on_every_backend
from topology.changelog import note_key, parse_key

PK = a_partition()
WINDOW_MS = fifo.DEDUPLICATION_WINDOW_MS


@on_every_backend
def test_a_note_is_read_within_its_window_and_kept_by_a_reopened_store(
    kv: KeyValueStore,
) -> None:
    # Given a note written at T0
    store = LeaseStore(kv)
    store.write_note(PK, notes.KIND_CLAIM, b"dedup-1", T0, b"value", sync=True)
    # Then it reads back within the window, not after it, and another kind does not see it
    assert store.note(PK, notes.KIND_CLAIM, b"dedup-1", T0 + WINDOW_MS - 1, WINDOW_MS) == (
        T0,
        b"value",
    )
    assert store.note(PK, notes.KIND_CLAIM, b"dedup-1", T0 + WINDOW_MS, WINDOW_MS) is None
    assert store.note(PK, notes.KIND_ATTEMPT, b"dedup-1", T0, WINDOW_MS) is None
    # and a store opened again on the same keys (a restart) reads it too
    assert LeaseStore(kv).note(PK, notes.KIND_CLAIM, b"dedup-1", T0 + 1, WINDOW_MS) == (
        T0,
        b"value",
    )


@on_every_backend
def test_a_rewritten_note_keeps_its_time_and_is_pruned_once(store: LeaseStore) -> None:
    # Given two notes, one rewritten a minute later
    store.write_note(PK, notes.KIND_CLAIM, b"a", T0, b"first", sync=False)
    store.write_note(PK, notes.KIND_CLAIM, b"b", T0 + 2 * MINUTE_MS, b"other", sync=False)
    store.rewrite_note(PK, notes.KIND_CLAIM, b"a", b"second")
    assert store.note(PK, notes.KIND_CLAIM, b"a", T0 + MINUTE_MS, WINDOW_MS) == (T0, b"second")
    # When notes written before T0 + 1 minute are pruned
    pruned = store.prune_notes(PK, notes.KIND_CLAIM, T0 + MINUTE_MS)
    # Then only the first goes, and a later prune finds nothing more of it
    assert pruned == [b"a"]
    assert store.note(PK, notes.KIND_CLAIM, b"a", T0, WINDOW_MS) is None
    assert store.prune_notes(PK, notes.KIND_CLAIM, T0 + MINUTE_MS) == []
    assert store.note(PK, notes.KIND_CLAIM, b"b", T0 + 2 * MINUTE_MS, WINDOW_MS) is not None


@on_every_backend
def test_forgetting_the_claims_leaves_the_attempts_and_dropping_the_partition_forgets_all(
    store: LeaseStore,
) -> None:
    store.write_note(PK, notes.KIND_CLAIM, b"x/1", T0, b"c", sync=False)
    store.write_note(PK, notes.KIND_CLAIM, b"x/2", T0, b"c", sync=False)
    store.write_note(PK, notes.KIND_ATTEMPT, b"attempt", T0, b"a", sync=False)
    # When the claims are forgotten (PurgeQueue)
    assert sorted(store.forget_notes(PK, notes.KIND_CLAIM)) == [b"x/1", b"x/2"]
    # Then the attempt is still there, the claims' time index is empty too
    assert store.note(PK, notes.KIND_CLAIM, b"x/1", T0, WINDOW_MS) is None
    assert store.prune_notes(PK, notes.KIND_CLAIM, T0 + DAY_MS) == []
    assert store.note(PK, notes.KIND_ATTEMPT, b"attempt", T0, WINDOW_MS) is not None
    # and dropping the partition forgets the rest
    store.drop_partition(PK)
    assert store.note(PK, notes.KIND_ATTEMPT, b"attempt", T0, WINDOW_MS) is None


@on_every_backend
def test_a_rebuild_restores_the_notes_the_changelog_holds_and_the_fair_flag(
    kv: KeyValueStore,
) -> None:
    # Given notes as the changelog holds them (one written, then rewritten; one tombstoned)
    # and a queue partition whose log holds a grouped message of a standard queue
    source = LeaseStore(MemoryKeyValueStore())
    claim = source.write_note(PK, notes.KIND_CLAIM, b"d", T0, b"unconfirmed", sync=False)
    confirmed = source.rewrite_note(PK, notes.KIND_CLAIM, b"d", b"confirmed")
    attempt = source.write_note(PK, notes.KIND_ATTEMPT, b"gone", T0, b"x", sync=False)
    assert confirmed is not None
    records = [(0, a_message("plain")), (1, a_message("grouped", message_group_id="g"))]
    # When a store is rebuilt from them
    rebuild = LeaseRebuild(kv, [PartitionPlan(PK, 4 * DAY_MS)], T0 + MINUTE_MS)
    for name, raw in [(b"d", claim), (b"gone", attempt), (b"d", confirmed), (b"gone", None)]:
        kind = notes.KIND_ATTEMPT if name == b"gone" else notes.KIND_CLAIM
        rebuild.apply_note(PK, kind, name, raw)
    rebuild.replay(PK, records)
    rebuild.finish(PK, 2)
    store = LeaseStore(kv)
    # Then the claim is there as last written, the tombstoned attempt is not, and the
    # partition is fair
    now_ms = T0 + MINUTE_MS
    assert store.note(PK, notes.KIND_CLAIM, b"d", now_ms, WINDOW_MS) == (T0, b"confirmed")
    assert store.note(PK, notes.KIND_ATTEMPT, b"gone", now_ms, WINDOW_MS) is None
    assert store.grouped(PK)
    # and the claim's time index is one key (pruned once)
    assert store.prune_notes(PK, notes.KIND_CLAIM, T0 + DAY_MS) == [b"d"]


@on_every_backend
def test_a_grouped_message_marks_its_partition_fair_for_good(kv: KeyValueStore) -> None:
    # Given a partition that ingested only plain messages, and one that ingested a grouped one
    other = a_partition(partition=1)
    store = LeaseStore(kv)
    store.ingest(PK, [(0, a_message("plain"))])
    store.ingest(other, [(0, a_message("plain")), (1, a_message("g", message_group_id="g"))])
    assert not store.grouped(PK)
    assert store.grouped(other)
    # When the grouped message is deleted and the store reopened (a restart)
    store.remove(other, 1, T0)
    reopened = LeaseStore(kv)
    # Then the partition is still fair, the other still plain
    assert reopened.grouped(other)
    assert not reopened.grouped(PK)


def test_a_note_key_in_the_changelog_names_its_partition_kind_and_name() -> None:
    key = note_key(PK, notes.KIND_CLAIM, b"an/id with/slashes")
    parsed = parse_key(key)
    assert parsed is not None
    assert (parsed.pk, parsed.offset, parsed.note) == (
        PK,
        None,
        (notes.KIND_CLAIM, b"an/id with/slashes"),
    )


def test_a_claim_encodes_and_tells_the_same_message_from_another() -> None:
    message = replace(a_message("m-1", body=b"body", message_group_id="g1"), deduplication_id="d")
    claim = Claim.of(message, partition=3)
    assert not claim.confirmed
    assert Claim.decode(claim.encode()) == claim
    confirmed = claim.with_offset(42)
    assert Claim.decode(confirmed.encode()) == confirmed
    assert confirmed.confirmed
    # A retry (same group, body and attributes, a new MessageId) is the same message, sent
    # again under the claim's MessageId and SentTimestamp; another body or group is not
    retry = replace(message, message_id="m-2", sent_ms=T0 + 5)
    assert claim.same_message(retry)
    assert (claim.resend(retry).message_id, claim.resend(retry).sent_ms) == ("m-1", T0)
    assert not claim.same_message(replace(message, body=b"other"))
    assert not claim.same_message(replace(message, message_group_id="g2"))
    assert fingerprint(message) != fingerprint(replace(message, message_group_id="g2"))


def test_the_claim_partition_depends_on_the_id_alone() -> None:
    partitions = {claim_partition(f"id-{i}", 4) for i in range(64)}
    assert partitions == {0, 1, 2, 3}
    assert claim_partition("same", 4) == claim_partition("same", 4)
