"""Rebuilding a lost lease store from the lease changelog and the queue topics (no I/O here).

What the changelog (`__kqs_leases`, compacted) holds per queue partition:

* one record per message whose lease changed after ingest (a receive, a visibility change, a
  dead-letter hold): its latest `LeaseFact`;
* a tombstone per message that was removed (deleted, dead-lettered, expired);
* a state record with the purge watermark, once the partition was purged;
* its notes (`notes.py`: FIFO deduplication claims, receive attempts), and their tombstones.

A message that was only ingested has no changelog record: its fact follows from its queue
record (`state.ingested_fact`), so ingest costs no changelog write. Rebuilding a
partition therefore replays its queue topic from the log start, and for each record decides:

    offset below the purge watermark     -> gone
    tombstone in the changelog           -> gone (deleted)
    fact in the changelog                -> live with that fact
    no changelog record                  -> live with a fresh fact (never received)
    live but older than the retention    -> gone (expired; also covers a tombstone that
                                            compaction already removed, see ARCHITECTURE.md)
    a FIFO duplicate (`fifo.py`)         -> gone (as ingest decided), whatever the above

The FIFO deduplication window is rebuilt by the same replay: every FIFO record, live or not,
writes its window entry as ingest did, in log order, so the same duplicates are skipped. The
FIFO group locks follow from the facts: a FIFO message (one with a deduplication id) received
and not visible at the rebuild locks its group.

Each fact record carries its writer's owner epoch (`topology/changelog.py`): of a message's
records, the one of the highest epoch counts, and among those of one epoch the latest. A
former owner's record that reached Kafka after the next owner's (a gateway woken from a stall,
a link that came back) thus never undoes what that owner did.

The changelog is applied first into the target store (facts as `F` keys, tombstones as
temporary `D` keys, the epoch of each when it is not 0 as a temporary `E` key), then the
queue records are replayed in offset order. The visibility of
the messages and their counts are not written: the lease store derives them from the facts
when it loads a partition (`visibility.py`). Memory stays bounded: nothing per message is
held in Python, everything goes through the `KeyValueStore` in batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from lease_store import fifo, notes, state

# The lease store's key layout, shared on purpose: a rebuild writes exactly what the store
# would have written.
from lease_store.keys import PartitionKey, _expiry_key, _fact_key, _message_key, _state_key
from lease_store.kv import KeyValueStore, WriteBatch
from lease_store.records import LeaseFact, StoredMessage
from lease_store.types import PartitionState

_I64 = struct.Struct(">q")
_MAX_OFFSET = (1 << 63) - 1


def _tombstone_key(pk: PartitionKey, offset: int) -> bytes:
    """A changelog tombstone, kept only while a rebuild runs (`D` never survives `finish`)."""
    return b"D" + pk.prefix + _I64.pack(offset)


def _epoch_key(pk: PartitionKey, offset: int) -> bytes:
    """The owner epoch of the record applied for an offset, kept only while a rebuild runs."""
    return b"E" + pk.prefix + _I64.pack(offset)


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """A queue partition to rebuild: its retention and the first offset still in its log."""

    pk: PartitionKey
    retention_ms: int
    log_start: int = 0


@dataclass(slots=True)
class _Progress:
    plan: PartitionPlan
    state: PartitionState
    purged_before_offset: int = 0
    # Range of offsets that have changelog entries; outside it a replayed record needs no
    # look-up (the common case: most messages were never received).
    lowest_change: int = _MAX_OFFSET
    highest_change: int = -1
    # The highest owner epoch applied so far: a record of at least this epoch wins without
    # looking up the epoch of the one it replaces (records come nearly always in epoch order).
    highest_epoch: int = 0
    next_offset: int = 0
    replayed: int = 0
    live: int = 0
    # FIFO: group -> offsets out of sight at the rebuild (leased, or held for a dead-letter
    # move), written as the group locks at `finish` (lease_store/fifo.py).
    group_locks: dict[str, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class RebuildStats:
    changelog_records: int = 0
    queue_records: int = 0
    live_messages: int = 0
    # Records a record of a higher owner epoch had replaced already (a former owner's, late).
    superseded: int = 0
    partitions: int = 0
    finished: list[PartitionKey] = field(default_factory=list)


class LeaseRebuild:
    """Writes the lease state of `plans` into an empty `kv` (see the module docstring).

    Call `apply_change` / `apply_purge_watermark` for every changelog record (in log order),
    then per partition `replay` its queue records in ascending offset order and `finish`.
    """

    def __init__(
        self, kv: KeyValueStore, plans: list[PartitionPlan], now_ms: int, batch_size: int = 2000
    ) -> None:
        self._kv = kv
        self._now_ms = now_ms
        self._batch_size = batch_size
        self._batch = WriteBatch()
        self._parts = {
            plan.pk: _Progress(plan, PartitionState(swept_until_ms=now_ms)) for plan in plans
        }
        self.stats = RebuildStats(partitions=len(plans))
        self._replaying = False
        # Epochs an interrupted rebuild left behind must not count. One range for all: only a
        # rebuild writes `E` keys, and one runs at a time (a gateway's restores take turns).
        self._kv.delete_range(b"E", b"F")

    # -- the changelog ---------------------------------------------------------------------

    def apply_change(
        self, pk: PartitionKey, offset: int, fact: LeaseFact | None, epoch: int = 0
    ) -> None:
        """One changelog record: the latest fact of a message, or a tombstone (None), written
        by the partition's owner of epoch `epoch`."""
        if self._replaying:
            raise RuntimeError("the whole changelog must be applied before any replay")
        self.stats.changelog_records += 1
        part = self._parts.get(pk)
        if part is None or offset < part.plan.log_start:
            return  # a deleted queue, or a record Kafka no longer has
        if epoch < part.highest_epoch:
            applied = fifo.batch_get(self._batch, self._kv.get)(_epoch_key(pk, offset))
            if applied is not None and epoch < _I64.unpack(applied)[0]:
                self.stats.superseded += 1
                return
        part.highest_epoch = max(part.highest_epoch, epoch)
        if epoch:
            self._batch.put(_epoch_key(pk, offset), _I64.pack(epoch))
        part.lowest_change = min(part.lowest_change, offset)
        part.highest_change = max(part.highest_change, offset)
        if fact is None:
            self._batch.delete(_fact_key(pk, offset))
            self._batch.put(_tombstone_key(pk, offset), b"")
        else:
            self._batch.delete(_tombstone_key(pk, offset))
            self._batch.put(_fact_key(pk, offset), fact.encode())
        self._flush_if_full()

    def apply_note(self, pk: PartitionKey, kind: bytes, name: bytes, raw: bytes | None) -> None:
        """One changelog record of a note (`notes.py`): its value as stored, or a tombstone."""
        self.stats.changelog_records += 1
        if pk not in self._parts:
            return  # a deleted queue
        old = fifo.batch_get(self._batch, self._kv.get)(notes.note_key(pk.prefix, kind, name))
        notes.drop_note(self._batch, pk.prefix, kind, name, old)
        if raw is not None:
            notes.put_note(self._batch, pk.prefix, kind, name, raw)
        self._flush_if_full()

    def apply_purge_watermark(self, pk: PartitionKey, before_offset: int) -> None:
        self.stats.changelog_records += 1
        part = self._parts.get(pk)
        if part is not None:
            part.purged_before_offset = max(part.purged_before_offset, before_offset)

    # -- the queue topic -------------------------------------------------------------------

    def replay(self, pk: PartitionKey, records: list[tuple[int, StoredMessage]]) -> None:
        """Queue records of one partition, in ascending offset order, from its log start."""
        if not self._replaying:
            self._flush()  # the changelog's facts must be readable now
            self._replaying = True
        part = self._parts[pk]
        now_ms = self._now_ms
        for offset, message in records:
            if offset < part.next_offset:
                continue  # already replayed
            if offset > part.next_offset:
                self._clear_changes(part, part.next_offset, offset)  # offsets the log lacks
            part.next_offset = offset + 1
            part.state.applied_offset = offset
            part.replayed += 1
            self.stats.queue_records += 1
            if message.message_group_id is not None:
                part.state.grouped = True  # as ingest marks it (`PartitionState.grouped`)
            if message.deduplication_scope is not None and fifo.deduplicate(
                fifo.batch_get(self._batch, self._kv.get), self._batch, pk.prefix, offset, message
            ):
                continue  # a FIFO duplicate: ingest skipped it too
            fact: LeaseFact | None = None
            if part.lowest_change <= offset <= part.highest_change:
                if self._kv.get(_tombstone_key(pk, offset)) is not None:
                    self._batch.delete(_tombstone_key(pk, offset))
                    continue  # deleted
                raw = self._kv.get(_fact_key(pk, offset))
                fact = LeaseFact.decode(raw) if raw is not None else None
            from_changelog = fact is not None
            if fact is None:
                fact = state.ingested_fact(message)
            if offset < part.purged_before_offset or state.is_expired(
                fact, now_ms, part.plan.retention_ms
            ):
                if from_changelog:
                    self._batch.delete(_fact_key(pk, offset))
                continue
            self._batch.put(_fact_key(pk, offset), fact.encode())
            self._batch.put(_message_key(pk, offset), message.encode())
            self._batch.put(_expiry_key(pk, fact.sent_ms, offset), b"")
            if message.deduplication_id is not None and fact.visible_at_ms > now_ms:
                if fact.receive_count > 0 and message.message_group_id is not None:
                    part.group_locks.setdefault(message.message_group_id, []).append(offset)
            part.live += 1
            self.stats.live_messages += 1
            self._flush_if_full()

    def finish(self, pk: PartitionKey, end_offset: int) -> PartitionState:
        """Close a partition whose log ends at `end_offset` (the next offset to be written).

        Ingest resumes after `end_offset - 1`; what the changelog says about offsets the log
        no longer (or not yet) holds is dropped. The write is synced.
        """
        part = self._parts[pk]
        self._clear_changes(part, part.next_offset, _MAX_OFFSET)
        if part.highest_epoch:  # it staged epochs (none when every record had epoch 0)
            self._flush()  # those still in the batch, before they are dropped
            self._kv.delete_range(_epoch_key(pk, 0), _epoch_key(pk, _MAX_OFFSET))
        st = part.state
        st.applied_offset = max(st.applied_offset, end_offset - 1)
        st.purged_before_offset = part.purged_before_offset
        for group, offsets in part.group_locks.items():
            self._batch.put(fifo.group_key(pk.prefix, group), fifo.encode_group_lock(offsets))
        self._batch.put(_state_key(pk), st.encode())
        self._flush(sync=True)
        self.stats.finished.append(pk)
        return st

    # -- internals -------------------------------------------------------------------------

    def _clear_changes(self, part: _Progress, start: int, end: int) -> None:
        """Drop changelog facts and tombstones of offsets in [start, end)."""
        start = max(start, part.lowest_change)
        end = min(end, part.highest_change + 1)
        if start >= end:
            return
        self._flush()
        pk = part.plan.pk
        for key_of in (_fact_key, _tombstone_key):
            while rows := self._kv.scan(key_of(pk, start), key_of(pk, end), limit=1000):
                batch = WriteBatch()
                for key, _ in rows:
                    batch.delete(key)
                self._kv.write(batch)

    def _flush_if_full(self) -> None:
        if len(self._batch) >= self._batch_size:
            self._flush()

    def _flush(self, sync: bool = False) -> None:
        if self._batch or sync:
            self._kv.write(self._batch, sync=sync)
            self._batch = WriteBatch()
