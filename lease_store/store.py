"""The lease store: per-message lease facts of every queue partition, on a `KeyValueStore`.

Key layout (all integers big-endian, so byte order is numeric order):

    F <partition key> <offset:8>                 -> LeaseFact
    M <partition key> <offset:8>                 -> StoredMessage
    X <partition key> <sent_ms:8> <offset:8>     -> empty  (the expiry index)
    S <partition key>                            -> PartitionState
    D <partition key> <offset:8>                 -> empty  (a young message deleted: young.py)
    U, W, G <partition key> ...                  -> FIFO queues' deduplication window and
                                                    group locks (see `fifo.py`)
    !format                                      -> the key layout's version (3)

where <partition key> is the queue incarnation id (16 bytes) and the Kafka partition (4).

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
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice

from lease_store import fifo, state
from lease_store.errors import MessageNotAvailable
from lease_store.floors import ScanFloors
from lease_store.fresh import DEFAULT_MAX_BYTES as FRESH_BYTES
from lease_store.fresh import FreshMessages
from lease_store.kv import KeyValueStore, WriteBatch
from lease_store.recent_ids import RecentIds
from lease_store.records import LeaseFact, StoredMessage
from lease_store.value_class import value_class
from lease_store.visibility import PartitionVisibility
from lease_store.young import Young, YoungMessages

_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_STATE = struct.Struct(">qqqqqq")
_offset_bytes = _I64.pack
_FACT_TIMES = struct.Struct(">qqi")  # the head of an encoded LeaseFact (records.py)
_MAX_TIME = (1 << 62) - 1
_FIFO_GROUP_CACHE = 50_000  # offsets per partition whose message group is kept in memory


class PartitionKey:
    """One partition of one incarnation of a queue's topic: the unit the store keeps.

    Interned: `PartitionKey(incarnation, partition)` gives the one live instance for those
    coordinates, so equality is identity and the dicts looked up by partition (~17 lookups
    per message moved) hash it in C. A value class with a Python `__hash__` paid a Python
    call for each of those lookups.
    """

    __slots__ = (
        "incarnation",
        "partition",
        "prefix",
        "fact_prefix",
        "message_prefix",
        "expiry_prefix",
        "__weakref__",
    )
    incarnation: bytes  # 16 bytes
    partition: int
    # Every key of the partition starts with it: built once (a message operation builds
    # several keys; recomputing it was ~20 calls per message moved).
    prefix: bytes
    # The partition's keys of each region (`_fact_key`, `_message_key`, `_expiry_key`).
    fact_prefix: bytes
    message_prefix: bytes
    expiry_prefix: bytes

    def __new__(cls, incarnation: bytes, partition: int) -> PartitionKey:
        prefix = incarnation + _U32.pack(partition)
        pk = _INTERNED.get(prefix)
        if pk is None:
            with _INTERNING:  # the changelog follower's thread makes them too
                pk = _INTERNED.get(prefix)
                if pk is None:
                    pk = object.__new__(cls)
                    object.__setattr__(pk, "incarnation", incarnation)
                    object.__setattr__(pk, "partition", partition)
                    object.__setattr__(pk, "prefix", prefix)
                    object.__setattr__(pk, "fact_prefix", b"F" + prefix)
                    object.__setattr__(pk, "message_prefix", b"M" + prefix)
                    object.__setattr__(pk, "expiry_prefix", b"X" + prefix)
                    _INTERNED[prefix] = pk
        return pk

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"PartitionKey is immutable: cannot set {name!r}")

    def __reduce__(self) -> tuple[type[PartitionKey], tuple[bytes, int]]:
        return PartitionKey, (self.incarnation, self.partition)  # a copy is the same instance

    def __repr__(self) -> str:
        return f"PartitionKey(incarnation={self.incarnation!r}, partition={self.partition})"


# Weak: a queue deleted and forgotten leaves no instance behind.
_INTERNED: weakref.WeakValueDictionary[bytes, PartitionKey] = weakref.WeakValueDictionary()
_INTERNING = threading.Lock()


@dataclass(slots=True)
class PartitionState:
    applied_offset: int = -1
    swept_until_ms: int = 0
    # A snapshot of the counts as of the last commit, for tools reading the stored state; the
    # store counts them again from the facts when it loads the partition.
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0
    purged_before_offset: int = 0

    def encode(self, applied_offset: int | None = None) -> bytes:
        """`applied_offset`: written instead of the applied offset (see `_state_bytes`)."""
        return _STATE.pack(
            self.applied_offset if applied_offset is None else applied_offset,
            self.swept_until_ms,
            self.visible,
            self.in_flight,
            self.delayed,
            self.purged_before_offset,
        )

    @classmethod
    def decode(cls, raw: bytes) -> PartitionState:
        return cls(*_STATE.unpack(raw))


@value_class
class Counts:
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.visible + other.visible,
            self.in_flight + other.in_flight,
            self.delayed + other.delayed,
        )


@value_class
class Delivery:
    """A message taken by a receive: its offset, its lease after the receive, its content."""

    offset: int
    fact: LeaseFact
    message: StoredMessage


@dataclass(slots=True)
class ReceiveOutcome:
    delivered: list[Delivery] = field(default_factory=list)
    # Messages that would pass maxReceiveCount: held back (not counted as received) until the
    # caller has moved them to the dead-letter queue and calls `remove`.
    dead_letter: list[Delivery] = field(default_factory=list)
    expired: int = 0
    expired_ids: list[str] = field(default_factory=list)  # their message ids


# The keys of a message's fact, stored copy and expiry entry. The per-message paths
# (`ingest`, `_message`, `_put_fact`, `_drop_sent`) build them in place from the same parts
# (`_offset_bytes`): three calls of these per message moved were ~4 % of its Python calls.
def _fact_key(pk: PartitionKey, offset: int) -> bytes:
    return pk.fact_prefix + _offset_bytes(offset)


def _message_key(pk: PartitionKey, offset: int) -> bytes:
    return pk.message_prefix + _offset_bytes(offset)


def _expiry_key(pk: PartitionKey, sent_ms: int, offset: int) -> bytes:
    return pk.expiry_prefix + _offset_bytes(max(sent_ms, 0)) + _offset_bytes(offset)


def _state_key(pk: PartitionKey) -> bytes:
    return b"S" + pk.prefix


@dataclass
class _Batch(WriteBatch):
    """A write batch of one partition that also notes the lease facts it changes (offset ->
    the fact as encoded, or None when removed) for the commit listener, which otherwise
    had to find them again among the batch's keys (a parse of every key, each commit).

    The per-message paths (ingest, a lease, a removal) write `ops` directly (None: a delete)
    rather than through `put` and `delete`: a method call per key was ~7 of the ~200 Python
    calls of a message's life."""

    facts: dict[int, bytes | None] = field(default_factory=dict)


# Called after every committed write with the lease facts it changed (offset -> the new fact
# as `LeaseFact.encode` wrote it, or None when removed: the changelog publishes these bytes
# as they are) and the partition state as written. Facts that ingest creates are not
# reported (the queue-topic record determines them), nor are the facts a purge drops (its
# watermark, in the state, covers them). The lease changelog (`topology/changelog.py`) listens.
CommitListener = Callable[[PartitionKey, dict[int, bytes | None], PartitionState], None]

FORMAT_KEY = b"!format"
# 1: one visibility index (`V`) for every message; 2: due entries moved to `R` by the sweep;
# 3: no visibility index on disk (visibility.py keeps it in memory).
FORMAT_VERSION = 3
# The key regions of the visibility indexes of formats 1 and 2 (every `V` and `R` key).
_OLD_INDEX_RANGES = ((b"V", b"W"), (b"R", b"S"))


class LeaseStore:
    """Lease facts of many queue partitions. Not thread-safe: one writer (the event loop)."""

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
        # Lower bound of the earliest SentTimestamp in the expiry index (see header).
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

    def fact(self, pk: PartitionKey, offset: int) -> LeaseFact | None:
        if self._young is not None and (young := self._young.get(pk, offset)) is not None:
            return young.fact
        raw = self._kv.get(_fact_key(pk, offset))
        return LeaseFact.decode(raw) if raw is not None else None

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
        for tag in (b"F", b"M", b"X", b"D", b"U", b"W", b"G"):
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

    # -- FIFO queues (fifo.py) -------------------------------------------------------------

    def deduplication_entry(
        self, pk: PartitionKey, scope_key: bytes, now_ms: int
    ) -> fifo.DedupEntry | None:
        """The message first sent under `scope_key` in the 5 minutes before `now_ms`, if any."""
        return fifo.window_entry(self._kv.get, pk.prefix, scope_key, now_ms)

    def prune_deduplication(self, pk: PartitionKey, now_ms: int, limit: int = 1000) -> int:
        """Forget up to `limit` deduplication entries sent 5 minutes or more before `now_ms`."""
        start = b"W" + pk.prefix
        end = start + _I64.pack(max(now_ms - fifo.DEDUPLICATION_WINDOW_MS + 1, 0))
        rows = self._kv.scan(start, end, limit=limit)
        if rows:
            batch = WriteBatch()
            fifo.prune_rows(fifo.batch_get(batch, self._kv.get), batch, pk.prefix, rows)
            self._kv.write(batch)
        return len(rows)

    def prune_group_locks(self, pk: PartitionKey, now_ms: int) -> int:
        """Drop the group locks no message holds any more; returns how many were dropped.

        A receive rewrites the locks of the groups it meets, but a group that sends nothing
        more would keep its lock key for ever: a periodic sweep calls this.
        """
        start = b"G" + pk.prefix
        released = [
            key
            for key, _ in self._kv.scan(start, start + b"\xff" * 16)
            if not self._group_locked(pk, key[len(start) :].decode(), now_ms, self._kv.get)
        ]
        if released:
            batch = WriteBatch()
            for key in released:
                batch.delete(key)
            self._kv.write(batch)
        return len(released)

    def receive_fifo(
        self,
        pk: PartitionKey,
        now_ms: int,
        max_messages: int,
        visibility_ms: int,
        retention_ms: int,
        max_receive_count: int | None = None,
        dead_letter_hold_ms: int = 30_000,
        scan_limit: int = 10_000,
        hold_ms: int | None = None,
    ) -> ReceiveOutcome:
        """`receive` for a FIFO queue: message groups in order, one consumer at a time.

        Nothing is taken from a group while one of its messages is in flight (its lock, see
        `fifo.py`); of the groups that are free, the one whose visible message comes first in
        the log gives all it can, in log order, then the next. A message held for a
        dead-letter move keeps its group locked, so the rest of the group waits for the move.
        At most `scan_limit` visible messages are looked at (those of locked groups are
        skipped, so a locked group with a long backlog costs a scan of it).

        With `hold_ms`, the messages are held as `hold` holds them (a message move task),
        not received, and their groups are locked meanwhile all the same.
        """
        st = self._state(pk)
        now_ms = self._not_before_sweep(st, now_ms)
        vis = self._swept(pk, now_ms)
        outcome = ReceiveOutcome()
        if not vis.visible:
            return outcome
        batch = _Batch()
        get = fifo.batch_get(batch, self._kv.get)
        locked: dict[str, bool] = {}
        candidates: dict[str, list[int]] = {}  # group -> offsets, groups in first-seen order
        groups = self._fifo_groups.setdefault(pk, {})
        if len(groups) > _FIFO_GROUP_CACHE:
            groups.clear()  # a bound, not an eviction policy: it refills as receives scan
        # Visible messages are looked at a page at a time, pages doubling from twice the number
        # wanted (small first: an unread message's group costs a read), and a page is read to
        # its end even when enough were found: the first free group then gives all it has in
        # the page, not only what came before the others.
        found = 0
        page = page_end = max(16, 2 * max_messages)
        for scanned, offset in enumerate(islice(vis.ready_in_order(), scan_limit), 1):
            group = groups.get(offset)
            if group is None:
                group = groups[offset] = self._message(pk, offset).message_group_id or ""
            if group not in locked:
                locked[group] = self._group_locked(pk, group, now_ms, get)
            if not locked[group]:
                candidates.setdefault(group, []).append(offset)
                found += 1
            if scanned == page_end:
                if found >= max_messages:
                    break
                page = min(2 * page, 1024)
                page_end += page
        taken: dict[str, list[int]] = {}
        for group, offsets in candidates.items():
            for offset in offsets:
                if len(outcome.delivered) + len(outcome.dead_letter) >= max_messages:
                    break
                message = self._message(pk, offset)
                fact = self._require_fact(pk, offset)
                if state.is_expired(fact, now_ms, retention_ms):
                    self._drop(pk, offset, fact, batch)
                    outcome.expired += 1
                    outcome.expired_ids.append(message.message_id)
                    continue
                if hold_ms is not None:
                    held = fact.with_visible_at(now_ms + hold_ms)
                    self._replace_fact(pk, st, offset, held, batch)
                    outcome.delivered.append(Delivery(offset, held, message))
                    taken.setdefault(group, []).append(offset)
                    continue
                if state.exceeds_max_receives(fact, max_receive_count):
                    held = fact.with_visible_at(now_ms + dead_letter_hold_ms)
                    self._replace_fact(pk, st, offset, held, batch)
                    outcome.dead_letter.append(Delivery(offset, held, message))
                    taken.setdefault(group, []).append(offset)
                    break  # the rest of the group waits for the move
                leased = state.receive(fact, now_ms, visibility_ms)
                self._replace_fact(pk, st, offset, leased, batch)
                outcome.delivered.append(Delivery(offset, leased, message))
                self._received_ids.remember((pk.prefix, offset), (message.message_id, fact.sent_ms))
                taken.setdefault(group, []).append(offset)
        for group in candidates:
            if group in taken:
                batch.put(fifo.group_key(pk.prefix, group), fifo.encode_group_lock(taken[group]))
            elif get(fifo.group_key(pk.prefix, group)) is not None:
                batch.delete(fifo.group_key(pk.prefix, group))  # a released lock
        self._commit(pk, st, batch)
        return outcome

    def receive_fair(
        self,
        pk: PartitionKey,
        now_ms: int,
        max_messages: int,
        visibility_ms: int,
        retention_ms: int,
        max_receive_count: int | None = None,
        dead_letter_hold_ms: int = 30_000,
        scan_limit: int = 10_000,
    ) -> ReceiveOutcome:
        """`receive` for a fair standard queue (messages with MessageGroupId): groups take turns.

        The visible messages are read in log order (at most `scan_limit`, until as many
        groups as `max_messages` were seen), then taken one per group in turn, groups in the
        order their first message comes, so a group that floods the queue does not keep the
        others' messages waiting behind its backlog. Messages without a group form one group.
        Nothing is locked: this is a standard queue.
        """
        st = self._state(pk)
        now_ms = self._not_before_sweep(st, now_ms)
        vis = self._swept(pk, now_ms)
        outcome = ReceiveOutcome()
        if not vis.visible:
            return outcome
        groups = self._fifo_groups.setdefault(pk, {})
        if len(groups) > _FIFO_GROUP_CACHE:
            groups.clear()
        queues: dict[str, list[int]] = {}  # group -> its visible offsets, groups in log order
        for offset in islice(vis.ready_in_order(), scan_limit):
            group = groups.get(offset)
            if group is None:
                group = groups[offset] = self._message(pk, offset).message_group_id or ""
            queues.setdefault(group, []).append(offset)
            if len(queues) >= max_messages and len(queues[group]) == 1:
                break  # as many groups as messages wanted: enough to take turns
        turns: list[int] = []  # round robin: each group's first, then each group's second...
        depth = 0
        while len(turns) < max_messages and any(len(q) > depth for q in queues.values()):
            turns += [q[depth] for q in queues.values() if len(q) > depth]
            depth += 1
        batch = _Batch()
        for offset in turns[:max_messages]:
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

    def _group_locked(self, pk: PartitionKey, group: str, now_ms: int, get: fifo.Get) -> bool:
        """Whether a message the group's last receive took is still out of sight."""
        raw = get(fifo.group_key(pk.prefix, group))
        if raw is None:
            return False
        for offset in fifo.decode_group_lock(raw):
            fact_raw = get(_fact_key(pk, offset))
            if fact_raw is not None and LeaseFact.decode(fact_raw).visible_at_ms > now_ms:
                return True
        return False

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
