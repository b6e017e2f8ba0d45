"""FIFO queues in the lease store: the deduplication window and the message-group locks.

Key families (next to `store.py`'s; integers big-endian):

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
partition; with scope `queue` the gateway checks every partition before it sends, and only a
race between two gateways sending one id with two groups could slip through.)

Group locks. While a message of a group is in flight, no later message of the group may be
received. `G` names the offsets the last receive took from the group (leased, or held for a
dead-letter move), written in the same batch as their facts. The facts stay the truth: the
group is locked while one of those offsets still has a fact that is not visible, so a
delete, a visibility change, a lease that ends or an expiry needs no `G` write; the next
receive that finds the lock released rewrites or drops it. A receive takes a group's visible
messages in log order, as many as it may, before the next group's.

Nothing here does I/O beyond the `get` it is handed.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

from lease_store.kv import WriteBatch
from lease_store.records import StoredMessage

DEDUPLICATION_WINDOW_MS = 5 * 60 * 1000
SCOPE_QUEUE = "queue"
SCOPE_MESSAGE_GROUP = "messageGroup"

_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">qq")

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
