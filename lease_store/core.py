"""The lease store's core: what it holds of each partition, and the steps its operations share.

A partition's state and visibility are loaded (built from its facts) the first time an
operation touches it and swept forward in memory; every change goes through one batch that
`_commit` writes with the partition's state and applied offset, then reports to the commit
listener. Young messages (young.py) are held here until they are written. The operations
built on this are `store.py`'s (`LeaseStore`, whose module header has the theory of
operation) and `fifo.py`'s (`FifoOperations`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from lease_store import state
from lease_store.floors import ScanFloors
from lease_store.fresh import DEFAULT_MAX_BYTES as FRESH_BYTES
from lease_store.fresh import FreshMessages
from lease_store.keys import _I64, PartitionKey, _fact_key, _offset_bytes, _state_key
from lease_store.kv import KeyValueStore, WriteBatch
from lease_store.recent_ids import RecentIds
from lease_store.records import LeaseFact, StoredMessage
from lease_store.types import (
    CommitListener,
    Delivery,
    PartitionState,
    ReceiveOutcome,
    _Batch,
)
from lease_store.visibility import PartitionVisibility
from lease_store.young import Young, YoungMessages

_FACT_TIMES = struct.Struct(">qqi")  # the head of an encoded LeaseFact (records.py)


class StoreCore:
    """The partitions `LeaseStore` holds and the internals its operations share."""

    def __init__(
        self,
        kv: KeyValueStore,
        on_commit: CommitListener | None = None,
        fresh_bytes: int = FRESH_BYTES,
        young_ms: int = 0,
    ) -> None:
        """`young_ms` > 0: a standard queue's message is written only once it has lived that
        long (young.py); 0 writes every message at ingest."""
        self._kv = kv
        self._states: dict[PartitionKey, PartitionState] = {}
        self._visibility: dict[PartitionKey, PartitionVisibility] = {}  # loaded with the state
        # Lower bound of the earliest SentTimestamp in the expiry index (see store.py's header).
        self._oldest_sent_ms: dict[PartitionKey, int] = {}
        # Where the live keys of each index begin, so scans skip tombstones (floors.py).
        self._floors = ScanFloors(kv, (b"F", b"X"))
        self._on_commit = on_commit
        # FIFO: the message group of offsets `receive_fifo` has scanned (a group never changes),
        # so a receive that skips a locked group's backlog reads keys, not messages.
        self._fifo_groups: dict[PartitionKey, dict[int, str]] = {}
        self._received_ids = RecentIds()  # for the events of deletes (recent_ids.py)
        # What a receive soon after the send finds without reading the store (fresh.py).
        self._fresh = FreshMessages(fresh_bytes)
        self._young: YoungMessages[PartitionKey] | None = (
            YoungMessages(young_ms) if young_ms > 0 else None
        )
        # Offsets of young messages deleted before a crash, found at a partition's load
        # (its `D` markers): ingest replays them from Kafka and skips these.
        self._deleted_young: dict[PartitionKey, set[int]] = {}
        # The `D` markers written for each partition and not yet dropped (`flush_young`).
        self._markers: dict[PartitionKey, list[int]] = {}
        # The applied offset in each partition's last state written (with young messages).
        self._applied_written: dict[PartitionKey, int] = {}
        # How many messages each partition lost so far (deleted, expired, purged, moved to a
        # dead-letter queue; in memory only), and what `backlog_start` and `oldest_sent_ms`
        # last found at that count (the latter in `_oldest_sent_ms`, see below). Neither
        # answer changes before the next removal (or, in an empty partition, the next
        # message), so the passes over every partition (backlog offsets every 5 s, gauges
        # every 10 s) read the store only for partitions that changed: at 10,000 queues their
        # scans were 14 % of the gateway's GIL time.
        self._removals: dict[PartitionKey, int] = {}
        # removals, the applied offset when the partition was empty (else -1), the start
        self._known_backlog_start: dict[PartitionKey, tuple[int, int, int]] = {}
        # The removal count at which `_oldest_sent_ms` was last the exact oldest (a scan, or
        # lowered by ingest since): until the next removal it answers `oldest_sent_ms`.
        self._oldest_exact_at: dict[PartitionKey, int] = {}

    def fact(self, pk: PartitionKey, offset: int) -> LeaseFact | None:
        if self._young is not None and (young := self._young.get(pk, offset)) is not None:
            return young.fact
        raw = self._kv.get(_fact_key(pk, offset))
        return LeaseFact.decode(raw) if raw is not None else None

    def forget_cached(self, pk: PartitionKey) -> None:
        """Drop what is held in memory about a partition whose keys were rewritten."""
        self._states.pop(pk, None)
        self._visibility.pop(pk, None)
        self._oldest_sent_ms.pop(pk, None)
        self._known_backlog_start.pop(pk, None)
        self._oldest_exact_at.pop(pk, None)
        self._fifo_groups.pop(pk, None)
        self._floors.forget(pk.prefix)
        # Young messages are not in the store: the partition's state on disk has its applied
        # offset below them, so ingest reads them again from Kafka (young.py).
        if self._young is not None:
            self._young.take_all(pk)
        self._deleted_young.pop(pk, None)
        self._markers.pop(pk, None)
        self._applied_written.pop(pk, None)

    def _take(
        self,
        pk: PartitionKey,
        st: PartitionState,
        offset: int,
        now_ms: int,
        visibility_ms: int,
        retention_ms: int,
        max_receive_count: int | None,
        dead_letter_hold_ms: int,
        batch: _Batch,
        outcome: ReceiveOutcome,
    ) -> None:
        """One visible message for a standard receive: dropped if expired, held for the
        dead-letter move past `max_receive_count`, else leased; recorded in `outcome`."""
        message = self._message(pk, offset)
        if self._visibility[pk].was_received(offset):
            fact = self._require_fact(pk, offset)
        else:
            # Never received: its fact still says what ingest derived from the message, but
            # perhaps a later `visible_at_ms` (a hold), which the ready set says is past.
            # Nothing else of it changes before a receive, so it need not be read.
            fact = state.ingested_fact(message)
        if state.is_expired(fact, now_ms, retention_ms):
            self._drop(pk, offset, fact, batch)
            outcome.expired += 1
            outcome.expired_ids.append(message.message_id)
        elif max_receive_count is not None and state.exceeds_max_receives(fact, max_receive_count):
            held = fact.with_visible_at(now_ms + dead_letter_hold_ms)
            self._replace_fact(pk, st, offset, held, batch)
            outcome.dead_letter.append(Delivery(offset, held, message))
        else:
            leased = state.receive(fact, now_ms, visibility_ms)
            self._replace_fact(pk, st, offset, leased, batch)
            outcome.delivered.append(Delivery(offset, leased, message))
            self._received_ids.remember((pk.prefix, offset), (message.message_id, fact.sent_ms))

    # -- internals -------------------------------------------------------------------------

    def _state(self, pk: PartitionKey) -> PartitionState:
        """The partition's state, its visibility built from its facts the first time."""
        st = self._states.get(pk)
        if st is None:
            raw = self._kv.get(_state_key(pk))
            st = PartitionState.decode(raw) if raw is not None else PartitionState()
            self._load_markers(pk, st.applied_offset)
            self._visibility[pk] = PartitionVisibility.from_facts(
                self._fact_times(pk), st.swept_until_ms
            )
            self._states[pk] = st
        return st

    def _fact_times(self, pk: PartitionKey) -> Iterator[tuple[int, int, int]]:
        """`(offset, visible_at_ms, receive_count)` of every fact, lowest offset first."""
        start, end = b"F" + pk.prefix, b"F" + pk.prefix + b"\xff" * 16
        offset_at = 1 + len(pk.prefix)
        while rows := self._floors.scan(b"F" + pk.prefix, start, end, limit=1000):
            for key, raw in rows:
                _, visible_at_ms, receive_count = _FACT_TIMES.unpack_from(raw)
                yield _I64.unpack_from(key, offset_at)[0], visible_at_ms, receive_count
            start = rows[-1][0] + b"\x00"

    def _swept(self, pk: PartitionKey, now_ms: int) -> PartitionVisibility:
        """The partition's visibility, swept to `now_ms`."""
        self._sweep(pk, self._state(pk), now_ms)
        return self._visibility[pk]

    def _durable_applied(self, pk: PartitionKey, st: PartitionState) -> int:
        """The applied offset to write: one below the partition's lowest young message, so a
        restart replays the young ones from Kafka (young.py)."""
        if self._young is not None:
            lowest = self._young.lowest(pk)
            if lowest is not None and lowest <= st.applied_offset:
                return lowest - 1
        return st.applied_offset

    def _state_bytes(self, pk: PartitionKey, st: PartitionState) -> bytes:
        return st.encode(self._durable_applied(pk, st))

    def _load_markers(self, pk: PartitionKey, applied_offset: int) -> None:
        """At a partition's load: the young messages deleted before a crash, which ingest
        will read again from Kafka and must skip; markers the applied offset passed go."""
        start = b"D" + pk.prefix
        rows = self._kv.scan(start, start + b"\xff" * 8)
        if not rows:
            return
        offsets = [_I64.unpack_from(key, len(start))[0] for key, _ in rows]
        above = {offset for offset in offsets if offset > applied_offset}
        if above:
            self._deleted_young[pk] = above
            self._markers[pk] = sorted(above)
        if len(above) < len(offsets) and self._young is not None:
            # (only a store that holds young messages cleans up: `kqs inspect` reads only)
            batch = WriteBatch()
            for offset in offsets:
                if offset <= applied_offset:
                    batch.delete(start + _offset_bytes(offset))
            self._kv.write(batch)

    def _not_ingested_yet(
        self, pk: PartitionKey, st: PartitionState, offset: int, batch: _Batch
    ) -> bool:
        """For a delete of a message this store has not (again) ingested: after a crash, a
        young message's handle may come back before ingest has replayed it. A marker makes
        the replay skip it, as for a young message deleted (young.py); without it the
        delete, answered as done, would be undone. Returns whether it is such a message."""
        if offset <= st.applied_offset or offset < st.purged_before_offset:
            return False
        batch.ops[b"D" + pk.prefix + _offset_bytes(offset)] = b""
        self._deleted_young.setdefault(pk, set()).add(offset)
        self._markers.setdefault(pk, []).append(offset)
        return True

    def _write_young(self, pk: PartitionKey, now_ms: int | None) -> int:
        """Write the partition's young messages (`now_ms` None: all; else those due)."""
        if self._young is None:
            return 0
        taken = self._young.take_all(pk) if now_ms is None else self._young.take_due(pk, now_ms)
        if not taken:
            return 0
        batch = _Batch()
        self._put_young(pk, taken, batch)
        # What was answered from the keys alone (no young message then) is not any more.
        self._known_backlog_start.pop(pk, None)
        self._oldest_exact_at.pop(pk, None)
        # Their facts reached the changelog with the writes that made them (or are the ones
        # ingest derives): nothing to report.
        self._commit(pk, self._state(pk), batch, report_facts=False)
        return len(taken)

    def _put_young(self, pk: PartitionKey, taken: list[tuple[int, Young]], batch: _Batch) -> None:
        """The keys of messages leaving the young ones: their fact, stored copy and expiry
        entry, as ingest writes them."""
        ops = batch.ops
        for offset, young in taken:
            ops[pk.fact_prefix + _offset_bytes(offset)] = young.fact.encode()  # _fact_key
            self._put_stored(pk, offset, young.message, young.fact.sent_ms, ops)

    def _put_stored(
        self,
        pk: PartitionKey,
        offset: int,
        message: StoredMessage,
        sent_ms: int,
        ops: dict[bytes, bytes | None],
    ) -> None:
        """A message's stored copy (kept as an object too, fresh.py) and expiry entry."""
        at = _offset_bytes(offset)
        message_key = pk.message_prefix + at  # _message_key
        ops[message_key] = message.encode()
        self._fresh.add(message_key, message)
        ops[pk.expiry_prefix + _offset_bytes(max(sent_ms, 0)) + at] = b""  # _expiry_key

    def _commit(
        self,
        pk: PartitionKey,
        st: PartitionState,
        batch: _Batch,
        sync: bool = False,
        report_facts: bool = True,
    ) -> None:
        if not batch and not batch.facts and not sync:
            return  # (young messages change facts without keys: those are still reported)
        vis = self._visibility[pk]
        st.visible, st.in_flight, st.delayed = vis.visible, vis.in_flight, vis.delayed
        durable = self._durable_applied(pk, st)
        batch.put(_state_key(pk), st.encode(durable))
        try:
            self._kv.write(batch, sync=sync)
        except BaseException:
            # The visibility in memory already has this batch's changes: build it again
            # from what the store holds.
            self.forget_cached(pk)
            raise
        self._floors.written(pk.prefix, batch)
        if self._young is not None:
            self._applied_written[pk] = durable
        if self._on_commit is not None:
            self._on_commit(pk, batch.facts if report_facts else {}, st)

    @staticmethod
    def _not_before_sweep(st: PartitionState, now_ms: int) -> int:
        """The time a lease change is computed at: never before the last sweep.

        The ready set holds what was visible at `swept_until_ms`; a caller's clock reading
        from before it (taken before an await, or a wall clock stepped back) would find
        messages there that are not visible at its `now_ms` yet, and lease them wrongly.
        """
        return max(now_ms, st.swept_until_ms)

    def _sweep(self, pk: PartitionKey, st: PartitionState, now_ms: int) -> None:
        """Make the messages whose `visible_at_ms` passed since the last sweep visible.

        In memory only: `swept_until_ms` reaches the store with the partition's next commit,
        and a store opened before that sweeps again from the older point.
        """
        if now_ms > st.swept_until_ms:
            self._visibility[pk].sweep(now_ms)
            st.swept_until_ms = now_ms

    def _require_fact(self, pk: PartitionKey, offset: int) -> LeaseFact:
        fact = self.fact(pk, offset)
        if fact is None:
            raise RuntimeError(f"the visibility names offset {offset} without a lease fact")
        return fact

    def _message(self, pk: PartitionKey, offset: int) -> StoredMessage:
        """A message that has a fact (one being received): kept since its ingest (fresh.py),
        or read. Only such a message is looked for among the kept ones: a partition dropped
        whole leaves its kept entries to age out, and `message` must not find those."""
        if self._young is not None and (young := self._young.get(pk, offset)) is not None:
            return young.message
        key = pk.message_prefix + _offset_bytes(offset)  # _message_key
        message = self._fresh.get(key) or self._stored_message(key)
        if message is None:
            raise RuntimeError(f"lease fact for offset {offset} has no stored message")
        return message

    def _stored_message(self, key: bytes) -> StoredMessage | None:
        raw = self._kv.get(key)
        return StoredMessage.decode(raw) if raw is not None else None

    def _put_fact(
        self, pk: PartitionKey, st: PartitionState, offset: int, fact: LeaseFact, batch: _Batch
    ) -> None:
        encoded = batch.facts[offset] = fact.encode()
        young = self._young.get(pk, offset) if self._young is not None else None
        if young is None:
            batch.ops[pk.fact_prefix + _offset_bytes(offset)] = encoded  # _fact_key
        else:
            young.fact = fact
        self._visibility[pk].add(
            offset, fact.visible_at_ms, fact.receive_count > 0, st.swept_until_ms
        )

    def _replace_fact(
        self, pk: PartitionKey, st: PartitionState, offset: int, new: LeaseFact, batch: _Batch
    ) -> None:
        self._visibility[pk].remove(offset)
        self._put_fact(pk, st, offset, new, batch)

    def _drop(self, pk: PartitionKey, offset: int, fact: LeaseFact, batch: _Batch) -> None:
        self._drop_sent(pk, offset, fact.sent_ms, batch)

    def _drop_sent(self, pk: PartitionKey, offset: int, sent_ms: int, batch: _Batch) -> None:
        """Remove the message at `offset`, sent at `sent_ms` (its expiry key says when)."""
        ops = batch.ops
        at = _offset_bytes(offset)
        if self._young is not None and self._young.pop(pk, offset) is not None:
            batch.facts[offset] = None
            lowest = self._young.lowest(pk)
            if lowest is not None and lowest < offset:
                # The applied offset on disk stays below `lowest`: a replay after a crash
                # would bring this message back but for the marker (young.py).
                ops[b"D" + pk.prefix + at] = b""
                self._markers.setdefault(pk, []).append(offset)
        else:
            ops[pk.fact_prefix + at] = batch.facts[offset] = None  # the keys: _fact_key, ...
            message_key = pk.message_prefix + at
            ops[message_key] = None
            self._fresh.discard(message_key)
            ops[pk.expiry_prefix + _offset_bytes(max(sent_ms, 0)) + at] = None
        self._visibility[pk].remove(offset)
        self._removed(pk)

    def _removed(self, pk: PartitionKey) -> None:
        """A message (or a stray expiry entry) of the partition is being removed."""
        self._removals[pk] = self._removals.get(pk, 0) + 1
