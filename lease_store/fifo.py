"""FIFO queues in the lease store: the deduplication window and the message-group locks.

Key families (next to `keys.py`'s; integers big-endian):

    U <partition key> <scope key>                 -> DedupEntry (the deduplication window)
    W <partition key> <sent_ms:8> <scope key>     -> empty      (the window's time index)
    G <partition key> <group id>                  -> offsets:8* (the message-group lock)

Deduplication. A FIFO message carries its deduplication id and its queue's
DeduplicationScope (record headers, `topology/record_format.py`). Its scope key is the id
(scope `queue`) or the group and the id (scope `messageGroup`). Ingesting the message writes
`U` (when, at which offset, under which message id) and `W` in the same batch as its lease
fact. A record whose scope key has a `U` entry of another offset sent less than five minutes
before it is a duplicate: ingest skips it (no fact, nothing to receive), so even a duplicate
that reached the log (two gateways racing, a producer retry) is never delivered. Entries older
than the window are pruned through `W`. The decision depends on the partition's records alone,
in log order, so a store rebuilt from the queue topic (`rebuild.py`) comes to the same one.
(Groups map to partitions, so scope `messageGroup` always meets its duplicates in one
partition; with scope `queue` one gateway checks every partition before it sends, and
several decide each id on one partition first: `fifo_claims.py`.)

Group locks. A FIFO group is available while its oldest undeleted message is visible, and a
receive takes its messages in order up to the first one out of sight (`fifo_groups.py` has
the rules and the order groups are served in). `G` names the group's offsets that receives
took and that may still be out of sight (leased, or held for a dead-letter move), written in
the same batch as their facts. The facts stay the truth: an offset in `G` hides the group's
later messages while its fact is not visible, so a delete, a visibility change, a lease that
ends or an expiry needs no `G` write; the next receive that meets the group rewrites the
entry (the offsets still out of sight, and those it took) or drops it.

The functions do no I/O beyond the `get` they are handed. `FifoOperations` holds the lease
store's operations on these keys and its receives for grouped messages (FIFO queues, and fair
standard queues' turns); `LeaseStore` (store.py) builds on it.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice

from lease_store import fifo_groups, state
from lease_store.fifo_groups import GroupRun
from lease_store.keys import PartitionKey, _fact_key
from lease_store.kv import WriteBatch
from lease_store.notes import NoteOperations
from lease_store.records import LeaseFact, StoredMessage
from lease_store.types import Delivery, ReceiveOutcome, _Batch
from lease_store.visibility import PartitionVisibility

DEDUPLICATION_WINDOW_MS = 5 * 60 * 1000
SCOPE_QUEUE = "queue"
SCOPE_MESSAGE_GROUP = "messageGroup"

_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">qq")
_FIFO_GROUP_CACHE = 50_000  # offsets per partition whose message group is kept in memory

Get = Callable[[bytes], bytes | None]


def content_deduplication_id(body: bytes) -> str:
    """ContentBasedDeduplication: the SHA-256 of the body, hex."""
    return hashlib.sha256(body).hexdigest()


def sequence_number(offset: int) -> str:
    """A FIFO message's SequenceNumber: its Kafka offset, 20 digits as SQS's are.

    A group lives on one partition, so its sequence numbers increase in send order.
    """
    return f"{offset:020d}"


def scope_key(deduplication_id: str, scope: str, group_id: str | None) -> bytes:
    """The bytes a deduplication id is unique under (ids and groups are printable ASCII)."""
    if scope == SCOPE_MESSAGE_GROUP:
        return (group_id or "").encode() + b"\x00" + deduplication_id.encode()
    return deduplication_id.encode()


def message_scope_key(message: StoredMessage) -> bytes | None:
    """The scope key of a message that takes part in deduplication, else None.

    Only messages sent to a FIFO queue carry a scope; a copy moved to a dead-letter queue
    keeps its deduplication id but not the scope, so the move is never refused as a duplicate.
    """
    if message.deduplication_id is None or message.deduplication_scope is None:
        return None
    return scope_key(
        message.deduplication_id, message.deduplication_scope, message.message_group_id
    )


@dataclass(frozen=True, slots=True)
class DedupEntry:
    """The message a scope key was first sent with, inside the window."""

    sent_ms: int
    offset: int
    message_id: str

    def encode(self) -> bytes:
        return _ENTRY.pack(self.sent_ms, self.offset) + self.message_id.encode()

    @classmethod
    def decode(cls, raw: bytes) -> DedupEntry:
        sent_ms, offset = _ENTRY.unpack_from(raw)
        return cls(sent_ms, offset, raw[_ENTRY.size :].decode())


def dedup_key(prefix: bytes, key: bytes) -> bytes:
    return b"U" + prefix + key


def dedup_time_key(prefix: bytes, sent_ms: int, key: bytes) -> bytes:
    return b"W" + prefix + _I64.pack(max(sent_ms, 0)) + key


def group_key(prefix: bytes, group_id: str) -> bytes:
    return b"G" + prefix + group_id.encode()


def batch_get(batch: WriteBatch, get: Get) -> Get:
    """Reads that see a batch's pending writes first."""

    def read(key: bytes) -> bytes | None:
        if key in batch.ops:
            return batch.ops[key]
        return get(key)

    return read


def deduplicate(
    get: Get, batch: WriteBatch, prefix: bytes, offset: int, message: StoredMessage
) -> bool:
    """Ingest's deduplication step: True if the record at `offset` is a duplicate to skip.

    Otherwise the record's window entry goes into `batch` (replacing one that has expired).
    `get` must see `batch`'s pending writes (`batch_get`).
    """
    key = message_scope_key(message)
    if key is None:
        return False
    raw = get(dedup_key(prefix, key))
    if raw is not None:
        entry = DedupEntry.decode(raw)
        if entry.offset == offset:
            return False  # replayed: the entry is this record's own
        if message.sent_ms - entry.sent_ms < DEDUPLICATION_WINDOW_MS:
            return True
        batch.delete(dedup_time_key(prefix, entry.sent_ms, key))
    batch.put(
        dedup_key(prefix, key), DedupEntry(message.sent_ms, offset, message.message_id).encode()
    )
    batch.put(dedup_time_key(prefix, message.sent_ms, key), b"")
    return False


def window_entry(get: Get, prefix: bytes, key: bytes, now_ms: int) -> DedupEntry | None:
    """The entry of `key` if it was sent within the window before `now_ms`."""
    raw = get(dedup_key(prefix, key))
    if raw is None:
        return None
    entry = DedupEntry.decode(raw)
    return entry if now_ms - entry.sent_ms < DEDUPLICATION_WINDOW_MS else None


def prune_rows(get: Get, batch: WriteBatch, prefix: bytes, rows: list[tuple[bytes, bytes]]) -> None:
    """Drop the window entries whose time-index rows (`W`, past the window) are `rows`."""
    at = 1 + len(prefix)
    for time_key, _ in rows:
        (sent_ms,) = _I64.unpack_from(time_key, at)
        key = time_key[at + 8 :]
        raw = get(dedup_key(prefix, key))
        if raw is not None and DedupEntry.decode(raw).sent_ms == sent_ms:
            batch.delete(dedup_key(prefix, key))
        batch.delete(time_key)


def encode_group_lock(offsets: list[int]) -> bytes:
    """A group lock's value: the offsets a receive took from the group (see the header)."""
    return b"".join(_I64.pack(offset) for offset in offsets)


def decode_group_lock(raw: bytes) -> list[int]:
    return [offset for (offset,) in _I64.iter_unpack(raw)]


def hidden_offsets(pk: PartitionKey, group: str, now_ms: int, get: Get) -> list[int]:
    """The group's offsets in its lock (`G`) that are out of sight at `now_ms`, ascending."""
    raw = get(group_key(pk.prefix, group))
    if raw is None:
        return []
    hidden = []
    for offset in decode_group_lock(raw):
        fact_raw = get(_fact_key(pk, offset))
        if fact_raw is not None and LeaseFact.decode(fact_raw).visible_at_ms > now_ms:
            hidden.append(offset)
    return sorted(hidden)


def group_locked(pk: PartitionKey, group: str, now_ms: int, get: Get) -> bool:
    """Whether a message a receive took from the group is still out of sight."""
    return bool(hidden_offsets(pk, group, now_ms, get))


class FifoOperations(NoteOperations):
    """`LeaseStore`'s operations for FIFO queues (the deduplication window, the group locks and
    the receives that honour them) and fair standard queues (groups take turns)."""

    def deduplication_entry(
        self, pk: PartitionKey, scope_key: bytes, now_ms: int
    ) -> DedupEntry | None:
        """The message first sent under `scope_key` in the 5 minutes before `now_ms`, if any."""
        return window_entry(self._kv.get, pk.prefix, scope_key, now_ms)

    def prune_deduplication(self, pk: PartitionKey, now_ms: int, limit: int = 1000) -> int:
        """Forget up to `limit` deduplication entries sent 5 minutes or more before `now_ms`."""
        start = b"W" + pk.prefix
        end = start + _I64.pack(max(now_ms - DEDUPLICATION_WINDOW_MS + 1, 0))
        rows = self._kv.scan(start, end, limit=limit)
        if rows:
            batch = WriteBatch()
            prune_rows(batch_get(batch, self._kv.get), batch, pk.prefix, rows)
            self._kv.write(batch)
        return len(rows)

    def forget_deduplication(self, pk: PartitionKey, before_offset: int) -> int:
        """PurgeQueue: forget the window entries of the messages below `before_offset` (the
        purge point), so a send after the purge is never a duplicate of a purged one, as in
        SQS. Returns how many were forgotten. Entries of later messages stay."""
        start = b"U" + pk.prefix
        end = start + b"\xff" * 16  # scope keys are printable ASCII
        forgotten = 0
        while rows := self._kv.scan(start, end, limit=1000):
            batch = WriteBatch()
            for key, raw in rows:
                entry = DedupEntry.decode(raw)
                if entry.offset < before_offset:
                    batch.delete(key)
                    batch.delete(dedup_time_key(pk.prefix, entry.sent_ms, key[len(start) :]))
                    forgotten += 1
            self._kv.write(batch, sync=True)
            start = rows[-1][0] + b"\x00"
        return forgotten

    def prune_group_locks(self, pk: PartitionKey, now_ms: int) -> int:
        """Drop the group locks no message holds any more; returns how many were dropped.

        A receive rewrites the locks of the groups it meets, but a group that sends nothing
        more would keep its lock key for ever: a periodic sweep calls this.
        """
        start = b"G" + pk.prefix
        released = [
            key
            for key, _ in self._kv.scan(start, start + b"\xff" * 16)
            if not group_locked(pk, key[len(start) :].decode(), now_ms, self._kv.get)
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
        """`receive` for a FIFO queue: message groups in order, as AWS serves them.

        A group gives its visible messages in order up to the first one out of sight, and
        only while its oldest message is visible; the groups give in the order they became
        available (`fifo_groups.py`). A message held for a dead-letter move hides the rest
        of its group until the move. At most `scan_limit` visible messages are looked at
        (those hidden behind an in-flight message are skipped, so a group with a long
        backlog behind one costs a scan of it).

        With `hold_ms`, the messages are held as `hold` holds them (a message move task),
        not received, and hide the rest of their groups meanwhile all the same.
        """
        st = self._state(pk)
        now_ms = self._not_before_sweep(st, now_ms)
        vis = self._swept(pk, now_ms)
        outcome = ReceiveOutcome()
        if not vis.visible:
            return outcome
        batch = _Batch()
        get = batch_get(batch, self._kv.get)
        runs = self._group_runs(pk, vis, now_ms, max_messages, scan_limit, get)
        taken: dict[str, list[int]] = {}
        for run in fifo_groups.serving_order(runs.values(), self._since_of(pk)):
            for offset in run.offsets:
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
                    taken.setdefault(run.group, []).append(offset)
                    continue
                if state.exceeds_max_receives(fact, max_receive_count):
                    held = fact.with_visible_at(now_ms + dead_letter_hold_ms)
                    self._replace_fact(pk, st, offset, held, batch)
                    outcome.dead_letter.append(Delivery(offset, held, message))
                    taken.setdefault(run.group, []).append(offset)
                    break  # the rest of the group waits for the move
                leased = state.receive(fact, now_ms, visibility_ms)
                self._replace_fact(pk, st, offset, leased, batch)
                outcome.delivered.append(Delivery(offset, leased, message))
                self._received_ids.remember((pk.prefix, offset), (message.message_id, fact.sent_ms))
                taken.setdefault(run.group, []).append(offset)
        for group, run in runs.items():
            still = run.hidden
            if group in taken:
                lock = sorted({*still, *taken[group]})
                batch.put(group_key(pk.prefix, group), encode_group_lock(lock))
            elif not still and get(group_key(pk.prefix, group)) is not None:
                batch.delete(group_key(pk.prefix, group))  # nothing of it out of sight
        self._commit(pk, st, batch)
        return outcome

    def _group_runs(
        self,
        pk: PartitionKey,
        vis: PartitionVisibility,
        now_ms: int,
        max_messages: int,
        scan_limit: int,
        get: Get,
    ) -> dict[str, GroupRun]:
        """The groups met among the visible messages, read in log order, with what each may
        give: pages doubling from twice the number wanted (small first: an unread message's
        group costs a read), each read to its end, until the groups met fill the receive or
        the scan ends; while a group back from flight is among them, until the settled groups
        fill it (`fifo_groups.py`; within `ORDER_WINDOW` messages)."""
        groups = self._fifo_groups.setdefault(pk, {})
        if len(groups) > _FIFO_GROUP_CACHE:
            groups.clear()  # a bound, not an eviction policy: it refills as receives scan
        runs: dict[str, GroupRun] = {}
        found = 0
        returned = False  # a group met gives a message back from flight first
        last_new: int | None = None  # the last never-received message read: the frontier
        since_of = self._since_of(pk)
        page = page_end = max(16, 2 * max_messages)
        for scanned, offset in enumerate(islice(vis.ready_in_order(), scan_limit), 1):
            group = groups.get(offset)
            if group is None:
                group = groups[offset] = self._message(pk, offset).message_group_id or ""
            received = vis.was_received(offset)
            run = runs.get(group)
            if run is None:
                run = runs[group] = GroupRun(group, hidden_offsets(pk, group, now_ms, get))
                if run.offer(offset, received):
                    found += 1
                    returned = returned or received
            elif len(run.offsets) < max_messages and run.offer(offset):  # no more is taken
                found += 1
            if not received:
                last_new = offset
            if scanned == page_end:
                if found >= max_messages and (
                    not returned
                    or scanned >= fifo_groups.ORDER_WINDOW
                    or (
                        last_new is not None
                        and fifo_groups.settled_count(runs.values(), since_of(last_new), since_of)
                        >= max_messages
                    )
                ):
                    break
                page = min(2 * page, 1024)
                page_end += page
                if scanned < fifo_groups.ORDER_WINDOW < page_end:
                    page_end = fifo_groups.ORDER_WINDOW  # a page ends where the window does
        return runs

    def _since_of(self, pk: PartitionKey) -> fifo_groups.SinceOf:
        def since_of(offset: int) -> fifo_groups.AvailableSince:
            return fifo_groups.available_since(offset, self._require_fact(pk, offset))

        return since_of

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
