"""Notes: small named values a partition keeps for a few minutes, beside its lease facts.

What a FIFO queue must remember across gateways and restarts that its queue records do not
tell: the deduplication claims of scope `queue` (`fifo_claims.py`) and what a receive with a
ReceiveRequestAttemptId got (`gateway/sqs/fifo.py`). Each note has a kind (one byte), a name
(the deduplication id, the attempt id) and the time it was written; it is read back only
within a window of that time, and pruned later. Keys (integers big-endian):

    N <partition key> <kind:1> <name>                 -> <at_ms:8> <value>
    O <partition key> <kind:1> <at_ms:8> <name>       -> empty  (the time index, for pruning)

Notes belong to their partition like its facts: they are dropped with it, and the gateway
publishes each one to the lease changelog (`topology/changelog.py`, `note_key`), from which
the partition's next owner restores them (`rebuild.py`'s `apply_note`). A note rewritten
keeps the time it was first written (`rewrite`), so its time index stays one key.
"""

from __future__ import annotations

import struct

from lease_store.core import StoreCore
from lease_store.keys import PartitionKey
from lease_store.kv import WriteBatch

_I64 = struct.Struct(">q")
KIND_CLAIM = b"c"  # a deduplication claim (scope `queue`)
KIND_ATTEMPT = b"a"  # a receive's ReceiveRequestAttemptId
KINDS = (KIND_CLAIM, KIND_ATTEMPT)


def note_key(prefix: bytes, kind: bytes, name: bytes) -> bytes:
    return b"N" + prefix + kind + name


def note_time_key(prefix: bytes, kind: bytes, at_ms: int, name: bytes) -> bytes:
    return b"O" + prefix + kind + _I64.pack(max(at_ms, 0)) + name


def encode_note(at_ms: int, value: bytes) -> bytes:
    """A note as stored, and as published to the changelog."""
    return _I64.pack(at_ms) + value


def decode_note(raw: bytes) -> tuple[int, bytes]:
    return _I64.unpack_from(raw)[0], raw[_I64.size :]


def put_note(batch: WriteBatch, prefix: bytes, kind: bytes, name: bytes, raw: bytes) -> None:
    """Write a note as encoded (`encode_note`) and its time-index key into `batch`."""
    at_ms, _ = decode_note(raw)
    batch.put(note_key(prefix, kind, name), raw)
    batch.put(note_time_key(prefix, kind, at_ms, name), b"")


def drop_note(
    batch: WriteBatch, prefix: bytes, kind: bytes, name: bytes, raw: bytes | None
) -> None:
    """Delete a note (its stored value `raw`, if any, names its time-index key) in `batch`."""
    batch.delete(note_key(prefix, kind, name))
    if raw is not None:
        batch.delete(note_time_key(prefix, kind, decode_note(raw)[0], name))


class NoteOperations(StoreCore):
    """The lease store's notes (see the module header). Writes are synced when asked: a
    claim must be durable before the message it admits is sent."""

    def note(
        self, pk: PartitionKey, kind: bytes, name: bytes, now_ms: int, window_ms: int
    ) -> tuple[int, bytes] | None:
        """(written at, value) of a note written less than `window_ms` before `now_ms`."""
        raw = self._kv.get(note_key(pk.prefix, kind, name))
        if raw is None:
            return None
        at_ms, value = decode_note(raw)
        return (at_ms, value) if now_ms - at_ms < window_ms else None

    def write_note(
        self, pk: PartitionKey, kind: bytes, name: bytes, at_ms: int, value: bytes, *, sync: bool
    ) -> bytes:
        """Write (or replace) a note; returns it as encoded, for the changelog."""
        batch = WriteBatch()
        old = self._kv.get(note_key(pk.prefix, kind, name))
        if old is not None and decode_note(old)[0] != at_ms:
            drop_note(batch, pk.prefix, kind, name, old)
        raw = encode_note(at_ms, value)
        put_note(batch, pk.prefix, kind, name, raw)
        self._kv.write(batch, sync=sync)
        return raw

    def rewrite_note(
        self, pk: PartitionKey, kind: bytes, name: bytes, value: bytes, *, sync: bool = False
    ) -> bytes | None:
        """Replace a note's value, keeping when it was written; None if there is no note."""
        old = self._kv.get(note_key(pk.prefix, kind, name))
        if old is None:
            return None
        return self.write_note(pk, kind, name, decode_note(old)[0], value, sync=sync)

    def prune_notes(
        self, pk: PartitionKey, kind: bytes, before_ms: int, limit: int = 1000
    ) -> list[bytes]:
        """Drop up to `limit` notes of `kind` written before `before_ms`; returns their names
        (the changelog forgets them too)."""
        start = b"O" + pk.prefix + kind
        rows = self._kv.scan(start, start + _I64.pack(max(before_ms, 0)), limit=limit)
        names = [key[len(start) + _I64.size :] for key, _ in rows]
        if rows:
            batch = WriteBatch()
            for name in names:
                raw = self._kv.get(note_key(pk.prefix, kind, name))
                if raw is not None and decode_note(raw)[0] < before_ms:
                    batch.delete(note_key(pk.prefix, kind, name))
            for key, _ in rows:
                batch.delete(key)
            self._kv.write(batch)
        return names

    def notes_of(self, pk: PartitionKey, kind: bytes) -> list[tuple[bytes, bytes]]:
        """Every note of `kind` as stored: (name, encoded note), for a hand-over."""
        first = b"N" + pk.prefix + kind
        start, end = first, first + b"\xff" * 16  # names are printable ASCII
        found: list[tuple[bytes, bytes]] = []
        while rows := self._kv.scan(start, end, limit=1000):
            found.extend((key[len(first) :], raw) for key, raw in rows)
            start = rows[-1][0] + b"\x00"
        return found

    def forget_notes(self, pk: PartitionKey, kind: bytes) -> list[bytes]:
        """Drop every note of `kind` (PurgeQueue forgets the claims); returns their names."""
        found = self.notes_of(pk, kind)
        if found:
            batch = WriteBatch()
            for name, raw in found:
                drop_note(batch, pk.prefix, kind, name, raw)
            self._kv.write(batch, sync=True)
        return [name for name, _ in found]
