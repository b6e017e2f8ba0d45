"""The lease store's key layout: the partition key and the keys of each region.

All integers big-endian, so byte order is numeric order:

    F <partition key> <offset:8>                 -> LeaseFact
    M <partition key> <offset:8>                 -> StoredMessage
    X <partition key> <sent_ms:8> <offset:8>     -> empty  (the expiry index)
    S <partition key>                            -> PartitionState (types.py)
    D <partition key> <offset:8>                 -> empty  (a young message deleted: young.py)
    U, W, G <partition key> ...                  -> FIFO queues' deduplication window and
                                                    group locks (see `fifo.py`)
    N, O <partition key> ...                     -> notes: FIFO deduplication claims and
                                                    receive attempts (see `notes.py`)
    !format                                      -> the key layout's version (3)

where <partition key> is the queue incarnation id (16 bytes) and the Kafka partition (4).
The store (`store.py`) and a rebuild (`rebuild.py`) write exactly these keys.
"""

from __future__ import annotations

import struct
import threading
import weakref

_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_offset_bytes = _I64.pack


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


# The keys of a message's fact, stored copy and expiry entry. The store's per-message paths
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


FORMAT_KEY = b"!format"
# 1: one visibility index (`V`) for every message; 2: due entries moved to `R` by the sweep;
# 3: no visibility index on disk (visibility.py keeps it in memory).
FORMAT_VERSION = 3
# The key regions of the visibility indexes of formats 1 and 2 (every `V` and `R` key).
_OLD_INDEX_RANGES = ((b"V", b"W"), (b"R", b"S"))
