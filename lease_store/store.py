"""The lease store: per-message lease facts of every queue partition, on a `KeyValueStore`.

The facts are the durable record of every lease. Which messages are visible now, and when
the others become visible, is derived from them and kept in memory only
(`visibility.py`): built from a partition's facts the first time an operation touches it,
then changed with every fact written. A sweep moves the messages whose time passed from
waiting to ready; "the next visible messages" are the first ready ones, oldest first in log
order. The Approximate* counters are the sizes of those sets, so they are exact; the
partition state stores a snapshot of them for tools, and they are counted again at load.
The expiry index orders messages by SentTimestamp, so `expire` reads only the messages past
the queue's retention period (a dead-lettered message keeps its original SentTimestamp, so
offsets alone would not give that order); `_oldest_sent_ms` keeps a lower bound on the
earliest SentTimestamp in it: while that is above the retention cutoff no message can have
expired and the index is not read.

Deleted keys linger in RocksDB as tombstones that every seek walks over, so scans of the
facts and of the expiry index start at a per-region floor below which nothing is live
(`floors.py`), and the RocksDB store bounds each iterator by the end of its range.

The applied Kafka offset of each partition is written in the same batch as the facts it
produced: after a crash, ingestion resumes at `applied_offset + 1` with nothing doubled.
Every call takes `now_ms` from the caller's injected clock; this module never reads time.

The key layout is `keys.py`'s and the values callers see are `types.py`'s. `LeaseStore`
builds on `core.py` (what is held about each partition, and how a change is written) and
`fifo.py` (the operations for FIFO and fair queues).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from lease_store import fifo, state
from lease_store.errors import MessageNotAvailable
from lease_store.fifo import FifoOperations
from lease_store.keys import (
    _I64,
    _OLD_INDEX_RANGES,
    FORMAT_KEY,
    FORMAT_VERSION,
    PartitionKey,
    _fact_key,
    _message_key,
    _offset_bytes,
    _state_key,
)
from lease_store.kv import KeyValueStore, WriteBatch
from lease_store.records import LeaseFact, StoredMessage
from lease_store.types import (
    Counts,
    Delivery,
    PartitionState,
    ReceiveOutcome,
    _Batch,
)
from lease_store.young import Young

_MAX_TIME = (1 << 62) - 1


class LeaseStore(FifoOperations):
    """Lease facts of many queue partitions. Not thread-safe: one writer (the event loop).

    Made as `LeaseStore(kv, on_commit, fresh_bytes, young_ms)` (`StoreCore`, core.py)."""

    def upgrade_format(self) -> bool:
        """Bring a store written by an older layout to `FORMAT_VERSION`; call once at open.

        Formats 1 and 2 kept the visibility indexes on disk; their keys are dropped (two range
        tombstones), since the indexes are now built from the facts. Returns whether the
        store was upgraded. A fresh store is just stamped.
        """
        raw = self._kv.get(FORMAT_KEY)
        if raw is not None and int(raw) >= FORMAT_VERSION:
            return False
        for start, end in _OLD_INDEX_RANGES:
            self._kv.delete_range(start, end)
        batch = WriteBatch()
        batch.put(FORMAT_KEY, str(FORMAT_VERSION).encode())
        self._kv.write(batch, sync=True)
        # A store of format 1 may have no format key; one with partitions had indexes.
        return raw is not None or bool(self._kv.scan(b"S", b"T", limit=1))

    def close(self) -> None:
        if self._young is not None:
            for pk in self._young.partitions():
                self._write_young(pk, None)
        self._kv.close()

    # -- reading ---------------------------------------------------------------------------

    def applied_offset(self, pk: PartitionKey) -> int:
        """The last Kafka offset whose record is reflected here, or -1."""
        return self._state(pk).applied_offset

    def counts(self, pk: PartitionKey, now_ms: int) -> Counts:
        """Exact numbers of visible, in-flight and delayed messages at `now_ms`."""
        vis = self._swept(pk, now_ms)
        return Counts(vis.visible, vis.in_flight, vis.delayed)

    def in_flight_at_most(self, pk: PartitionKey) -> int:
        """An upper bound of the in-flight count, without sweeping: a sweep only moves
        messages out of flight (their leases ended), never into it."""
        self._state(pk)
        return self._visibility[pk].in_flight

    def next_visible_at_ms(self, pk: PartitionKey, now_ms: int) -> int | None:
        """When the next lease or delay of this partition ends after `now_ms`, if any."""
        return self._swept(pk, now_ms).next_due_ms()

    def grouped(self, pk: PartitionKey) -> bool:
        """Whether the partition ever stored a grouped message (a fair standard queue's)."""
        return self._state(pk).grouped

    def has_visible(self, pk: PartitionKey, now_ms: int) -> bool:
        return self._swept(pk, now_ms).visible > 0

    def backlog_start(self, pk: PartitionKey) -> int:
        """The lowest offset not yet deleted (applied offset + 1 when nothing is live).

        Committed as the queue topic's consumer-group offset, so Kafka tools show the
        backlog as lag.
        """
        young_lowest = self._young.lowest(pk) if self._young is not None else None
        start = self._stored_backlog_start(pk)
        return start if young_lowest is None else min(start, young_lowest)

    def _stored_backlog_start(self, pk: PartitionKey) -> int:
        removals = self._removals.get(pk, 0)
        known = self._known_backlog_start.get(pk)
        if known is not None and known[0] == removals:
            _, applied_when_empty, start = known
            if applied_when_empty < 0 or applied_when_empty == self._state(pk).applied_offset:
                return start
        first = self._floors.scan(
            b"F" + pk.prefix, b"F" + pk.prefix, b"F" + pk.prefix + b"\xff" * 8, limit=1
        )
        if first:
            (offset,) = _I64.unpack_from(first[0][0], 1 + len(pk.prefix))
            self._known_backlog_start[pk] = (removals, -1, offset)
            return int(offset)
        applied = self._state(pk).applied_offset
        self._known_backlog_start[pk] = (removals, applied, applied + 1)
        return applied + 1

    def partition_state(self, pk: PartitionKey, now_ms: int | None = None) -> PartitionState:
        """A copy of the partition's state; with `now_ms`, its counters as `counts` gives them.

        Never writes (a sweep changes only what is held in memory), so it also serves
        read-only views of a store another process has open (`kqs inspect`).
        """
        st = self._state(pk)
        vis = self._visibility[pk] if now_ms is None else self._swept(pk, now_ms)
        return replace(st, visible=vis.visible, in_flight=vis.in_flight, delayed=vis.delayed)

    # -- writing ---------------------------------------------------------------------------

    def ingest(
        self, pk: PartitionKey, records: list[tuple[int, StoredMessage]], now_ms: int | None = None
    ) -> int:
        """Add newly read log records; returns how many were new.

        Offsets at or below the applied offset (a replay after a crash) or below the purge
        watermark are skipped, so ingesting is idempotent.

        With `now_ms` the partition is swept to it first, so a message visible on arrival is
        ready at once rather than waiting for the next sweep.
        """
        st = self._state(pk)
        batch = _Batch()
        ops = batch.ops
        if now_ms is not None and records:
            self._sweep(pk, st, now_ms)
        added = 0
        # A standard queue's message is held young (young.py); a grouped one (FIFO, fair
        # queues) is written at once, as its group's lock and order are read from the store.
        young = self._young if now_ms is not None else None
        deleted_young = self._deleted_young.get(pk)
        for offset, message in records:
            if offset <= st.applied_offset:
                continue
            st.applied_offset = offset
            if offset < st.purged_before_offset:
                continue
            if message.message_group_id is not None:
                st.grouped = True  # a fair queue from now on (`PartitionState.grouped`)
            if deleted_young and offset in deleted_young:
                deleted_young.discard(offset)
                continue  # deleted while young, before a crash: its marker says so
            if message.deduplication_scope is not None and fifo.deduplicate(
                fifo.batch_get(batch, self._kv.get), batch, pk.prefix, offset, message
            ):
                continue  # a FIFO duplicate within the deduplication window: never delivered
            fact = state.ingested_fact(message)
            if young is not None and message.message_group_id is None:
                assert now_ms is not None
                young.add(pk, offset, Young(message, fact, now_ms))
                self._visibility[pk].add(
                    offset, fact.visible_at_ms, fact.receive_count > 0, st.swept_until_ms
                )
            else:
                self._put_fact(pk, st, offset, fact, batch)
                self._put_stored(pk, offset, message, fact.sent_ms, ops)
            oldest = self._oldest_sent_ms.get(pk)
            if oldest is not None and fact.sent_ms < oldest:
                self._oldest_sent_ms[pk] = fact.sent_ms
            added += 1
        if records:
            # Saved even when every record was skipped (purged), so a restart resumes after them.
            batch.put(_state_key(pk), self._state_bytes(pk, st))
            self._commit(pk, st, batch, report_facts=False)
        return added

    def receive(
        self,
        pk: PartitionKey,
        now_ms: int,
        max_messages: int,
        visibility_ms: int,
        retention_ms: int,
        max_receive_count: int | None = None,
        dead_letter_hold_ms: int = 30_000,
    ) -> ReceiveOutcome:
        """Lease up to `max_messages` visible messages, oldest (in log order) first."""
        st = self._state(pk)
        now_ms = self._not_before_sweep(st, now_ms)
        vis = self._swept(pk, now_ms)
        outcome = ReceiveOutcome()
        if not vis.visible:
            return outcome
        batch = _Batch()
        # With a visibility timeout of 0 a leased message stays visible, so offsets already
        # taken by this call are skipped rather than taken twice.
        seen: set[int] = set()
        while len(outcome.delivered) + len(outcome.dead_letter) < max_messages:
            wanted = max_messages - len(outcome.delivered) - len(outcome.dead_letter)
            scanned = vis.first_ready(wanted + len(seen))
            candidates = [offset for offset in scanned if offset not in seen][:wanted]
            if not candidates:
                break
            seen.update(candidates)
            for offset in candidates:
                self._take(
                    pk,
                    st,
                    offset,
                    now_ms,
                    visibility_ms,
                    retention_ms,
                    max_receive_count,
                    dead_letter_hold_ms,
                    batch,
                    outcome,
                )
        self._commit(pk, st, batch)
        return outcome

    def remove(self, pk: PartitionKey, offset: int, now_ms: int, *, sync: bool = True) -> bool:
        """Delete a message's state (DeleteMessage, or after a dead-letter move).

        Returns False when it was already gone. The write is synced: a deletion that was
        acknowledged must survive a crash, or the message would be delivered again. With
        `sync=False` the caller must call `sync()` before acknowledging it (so that many
        concurrent deletions share one fsync).
        """
        st = self._state(pk)
        self._sweep(pk, st, now_ms)
        batch = _Batch()
        fact = self.fact(pk, offset)
        if fact is None:
            if self._not_ingested_yet(pk, st, offset, batch):
                self._commit(pk, st, batch, sync=sync)
            return False
        self._drop(pk, offset, fact, batch)
        self._commit(pk, st, batch, sync=sync)
        return True

    def remove_many(self, pk: PartitionKey, offsets: Sequence[int], now_ms: int) -> dict[int, str]:
        """Delete several messages of one partition in one unsynced write (DeleteMessageBatch).

        Returns the MessageId of each message removed, by offset; offsets already gone (or
        named twice) are left out. The caller must call `sync()` before acknowledging.
        """
        st = self._state(pk)
        vis = self._swept(pk, now_ms)
        batch = _Batch()
        removed: dict[int, str] = {}
        for offset in offsets:
            # The visibility holds exactly the offsets that have a fact, so whether the
            # message is still here needs no read; nor, when its receive is remembered, do
            # its MessageId and SentTimestamp (recent_ids.py).
            if offset in removed or offset not in vis:
                self._not_ingested_yet(pk, st, offset, batch)
                continue
            remembered = self._received_ids.take((pk.prefix, offset))
            if remembered is None and self._young is not None:
                young = self._young.get(pk, offset)
                if young is not None:
                    remembered = (young.message.message_id, young.fact.sent_ms)
            if remembered is None:
                sent_ms = self._require_fact(pk, offset).sent_ms
                raw = self._kv.get(_message_key(pk, offset))
                remembered = (StoredMessage.id_of(raw) if raw is not None else "", sent_ms)
            removed[offset], sent_ms = remembered
            self._drop_sent(pk, offset, sent_ms, batch)
        self._commit(pk, st, batch)
        return removed

    def hold(
        self,
        pk: PartitionKey,
        now_ms: int,
        max_messages: int,
        hold_ms: int,
        retention_ms: int,
    ) -> list[Delivery]:
        """Take up to `max_messages` visible messages out of sight for `hold_ms`, oldest first.

        For a message move task: unlike `receive`, the receive count, the first-receive time
        and the receipt epoch stay as they were, so the hold is not a client receive. The
        caller copies each held message elsewhere and then calls `remove`; if it never does,
        the message is visible again when the hold ends. A held message that was never
        received counts as delayed meanwhile (states are derived from the facts, and these
        say "not visible, never received"). Expired messages are dropped, not held.
        """
        if hold_ms <= 0:
            raise ValueError("a hold must last longer than 0 ms")
        st = self._state(pk)
        now_ms = self._not_before_sweep(st, now_ms)
        vis = self._swept(pk, now_ms)
        batch = _Batch()
        held: list[Delivery] = []
        while len(held) < max_messages:
            # Held messages leave the ready set, so each look sees only untaken ones.
            offsets = vis.first_ready(max_messages - len(held))
            if not offsets:
                break
            for offset in offsets:
                fact = self._require_fact(pk, offset)
                if state.is_expired(fact, now_ms, retention_ms):
                    self._drop(pk, offset, fact, batch)
                    continue
                taken = fact.with_visible_at(now_ms + hold_ms)
                self._replace_fact(pk, st, offset, taken, batch)
                held.append(Delivery(offset, taken, self._message(pk, offset)))
        self._commit(pk, st, batch)
        return held

    def expire(self, pk: PartitionKey, now_ms: int, retention_ms: int) -> int:
        """Drop every message sent `retention_ms` or longer ago, whatever its state.

        Returns how many were dropped. Reads only the expired entries of the expiry index,
        so calling it before reading the counters (and periodically) is cheap and keeps
        `ApproximateNumberOfMessages*` from counting messages no receive would return.
        """
        return len(self.expire_ids(pk, now_ms, retention_ms))

    def expire_ids(self, pk: PartitionKey, now_ms: int, retention_ms: int) -> list[str]:
        """`expire`, returning the message ids of the dropped messages."""
        cutoff_ms = now_ms - retention_ms  # state.is_expired: sent_ms <= cutoff_ms
        if cutoff_ms < 0:
            return []
        oldest = self._oldest_sent_ms.get(pk)
        if oldest is not None and oldest > cutoff_ms:
            return []  # nothing is old enough: no read (see the module header)
        st = self._state(pk)
        start = b"X" + pk.prefix
        end = b"X" + pk.prefix + _I64.pack(cutoff_ms + 1)
        offset_at = 1 + len(pk.prefix) + 8
        dropped: list[str] = []
        self._sweep(pk, st, now_ms)
        while rows := self._floors.scan(start, start, end, limit=1000):
            batch = _Batch()
            for key, _ in rows:
                (offset,) = _I64.unpack_from(key, offset_at)
                fact = self.fact(pk, offset)
                if fact is None:
                    batch.delete(key)  # an entry left behind: nothing to drop
                    self._removed(pk)
                    continue
                message = self.message(pk, offset)
                self._drop(pk, offset, fact, batch)
                dropped.append(message.message_id if message is not None else "")
            self._commit(pk, st, batch)
        held = self._young.of(pk) if self._young is not None else None
        if held:
            expired = [(o, y) for o, y in held.items() if y.fact.sent_ms <= cutoff_ms]
            if expired:
                batch = _Batch()
                for offset, young in expired:
                    self._drop(pk, offset, young.fact, batch)
                    dropped.append(young.message.message_id)
                self._commit(pk, st, batch)
        self._scan_oldest_sent(pk)
        return dropped

    def change_visibility(
        self,
        pk: PartitionKey,
        offset: int,
        epoch: int,
        now_ms: int,
        visibility_ms: int,
        *,
        sync: bool = True,
    ) -> LeaseFact:
        """Restart a lease (ChangeMessageVisibility); raises the `state` module's errors.

        Synced like `remove`, with the same `sync=False` option.
        """
        st = self._state(pk)
        now_ms = self._not_before_sweep(st, now_ms)
        self._sweep(pk, st, now_ms)
        batch = _Batch()
        fact = self.fact(pk, offset)
        if fact is None:
            raise MessageNotAvailable("message was deleted")
        if self._young is not None and self._young.get(pk, offset) is not None:
            # Synced, so it must outlive a crash: the partition's young messages are written
            # now (a crash replays young ones as ingested, which would undo the change).
            self._put_young(pk, self._young.take_all(pk), batch)
        changed = state.change_visibility(fact, epoch, now_ms, visibility_ms)
        self._replace_fact(pk, st, offset, changed, batch)
        self._commit(pk, st, batch, sync=sync)
        return changed

    def flush_young(self, now_ms: int) -> int:
        """Write the young messages that have lived `young_ms` (all of them when too many are
        held), and drop the deletion markers that the applied offset on disk has passed.
        Returns how many messages were written. Called periodically (young.py)."""
        if self._young is None:
            return 0
        written = 0
        for pk in self._young.due(now_ms):
            written += self._write_young(pk, now_ms)
        for pk, offsets in list(self._markers.items()):
            # The applied offset of the partition's last state written: markers below it are
            # not needed (a replay starts above them).
            durable = self._applied_written.get(pk)
            if durable is None:
                continue
            passed = [offset for offset in offsets if offset <= durable]
            if not passed:
                continue
            batch = WriteBatch()
            for offset in passed:
                batch.delete(b"D" + pk.prefix + _offset_bytes(offset))
            self._kv.write(batch)
            left = [offset for offset in offsets if offset > durable]
            if left:
                self._markers[pk] = left
            else:
                del self._markers[pk]
        return written

    def sync(self) -> None:
        """Make every write so far durable (after `remove` / `change_visibility` with
        `sync=False`)."""
        self._kv.sync()

    def oldest_sent_ms(self, pk: PartitionKey) -> int | None:
        """SentTimestamp of the oldest message still here, in any state (None: empty).

        The first entry of the expiry index: ApproximateAgeOfOldestMessage without a scan.
        """
        removals = self._removals.get(pk, 0)
        bound = self._oldest_sent_ms.get(pk)
        if bound is None or self._oldest_exact_at.get(pk) != removals:
            bound = self._scan_oldest_sent(pk)
        if self._young is not None:
            young_oldest = self._young.oldest_sent_ms(pk)
            if young_oldest is not None:
                bound = min(bound, young_oldest)
        return None if bound == _MAX_TIME else bound

    def _scan_oldest_sent(self, pk: PartitionKey) -> int:
        """The first expiry entry's SentTimestamp (`_MAX_TIME`: none), kept as
        `_oldest_sent_ms` and marked exact until the partition's next removal."""
        start = b"X" + pk.prefix
        first = self._floors.scan(start, start, start + b"\xff" * 16, limit=1)
        oldest = int(_I64.unpack_from(first[0][0], len(start))[0]) if first else _MAX_TIME
        self._oldest_sent_ms[pk] = oldest
        self._oldest_exact_at[pk] = self._removals.get(pk, 0)
        return oldest

    def facts(self, pk: PartitionKey) -> Iterator[tuple[int, LeaseFact]]:
        """Every message's fact in the partition, lowest offset first, read a page at a time
        (no store iterator stays open between pages)."""
        start, end = b"F" + pk.prefix, b"F" + pk.prefix + b"\xff" * 16
        while rows := self._kv.scan(start, end, limit=1000):
            for key, raw in rows:
                yield _I64.unpack_from(key, 1 + len(pk.prefix))[0], LeaseFact.decode(raw)
            start = rows[-1][0] + b"\x00"

    def deleted_young(self, pk: PartitionKey) -> list[int]:
        """Offsets above the applied offset whose messages were deleted young (their `D`
        markers, read at the partition's load): a replay must skip them (young.py)."""
        self._state(pk)
        return sorted(self._deleted_young.get(pk, ()))

    def message(self, pk: PartitionKey, offset: int) -> StoredMessage | None:
        if self._young is not None and (young := self._young.get(pk, offset)) is not None:
            return young.message
        return self._stored_message(_message_key(pk, offset))

    def purge(self, pk: PartitionKey, before_offset: int, now_ms: int) -> int:
        """Drop every message below `before_offset` and refuse to ingest them again."""
        st = self._state(pk)
        self._sweep(pk, st, now_ms)
        self._write_young(pk, None)  # then dropped with the others, by the scan below
        batch = _Batch()
        dropped = 0
        start, end = b"F" + pk.prefix, _fact_key(pk, before_offset)
        while rows := self._kv.scan(start, end, limit=1000):
            for key, raw in rows:
                (offset,) = _I64.unpack_from(key, 1 + len(pk.prefix))
                self._drop(pk, offset, LeaseFact.decode(raw), batch)
                dropped += 1
            self._commit(pk, st, batch, report_facts=False)
            batch = _Batch()
        st.purged_before_offset = max(st.purged_before_offset, before_offset)
        self._commit(pk, st, batch, sync=True, report_facts=False)
        return dropped

    def drop_partition(self, pk: PartitionKey, *, offsets: bool = True) -> list[int]:
        """Forget everything about a partition (its queue was deleted, or it is restored).

        Returns the offsets of the messages it still held (unless `offsets` is False), so
        that their changelog records can be removed too.
        """
        dropped = [offset for offset, _ in self.facts(pk)] if offsets else []
        if self._young is not None:
            young = [offset for offset, _ in self._young.take_all(pk)]
            dropped = sorted(dropped + young) if offsets else dropped
        for tag in (b"F", b"M", b"X", b"D", b"U", b"W", b"G", b"N", b"O"):
            self._kv.delete_range(tag + pk.prefix, tag + pk.prefix + b"\xff" * 16)
        batch = WriteBatch()
        batch.delete(_state_key(pk))
        self._kv.write(batch, sync=True)
        self.forget_cached(pk)
        return dropped

    @property
    def kv(self) -> KeyValueStore:
        """The key-value store underneath, for rebuilding dropped partitions in place while
        the others are served (`gateway/cluster/ownership.py`); call `forget_cached` afterwards."""
        return self._kv
