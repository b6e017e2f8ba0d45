"""The one storage contract the lease store is written against: an ordered byte map.

`MemoryKeyValueStore` (tests, ephemeral use) and `RocksKeyValueStore` (durable default)
implement it and are verified by the same contract suite (`tests/unit/lease_store/test_kv_contract.py`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


@dataclass
class WriteBatch:
    """Puts and deletes applied atomically; a later operation on a key wins."""

    ops: dict[bytes, bytes | None] = field(default_factory=dict)

    def put(self, key: bytes, value: bytes) -> None:
        self.ops[key] = value

    def delete(self, key: bytes) -> None:
        self.ops[key] = None

    def __len__(self) -> int:
        return len(self.ops)


class KeyValueStore(ABC):
    @abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The value stored under `key`, or None."""

    @abstractmethod
    def scan(self, start: bytes, end: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        """Entries with `start <= key < end` in ascending key order, at most `limit` of them.

        Returns a list rather than an iterator so no store iterator outlives the call (an
        open RocksDB iterator would keep the database locked after close).
        """

    @abstractmethod
    def write(self, batch: WriteBatch, *, sync: bool = False) -> None:
        """Apply `batch` atomically; with `sync`, return only after it is durable on disk."""

    @abstractmethod
    def delete_range(self, start: bytes, end: bytes) -> None:
        """Remove every entry with `start <= key < end` (not synced; `sync` makes it durable).

        One range tombstone in RocksDB, instead of a tombstone per key that later scans
        would walk over: dropping a partition of 100,000 messages key by key took seconds.
        """

    @abstractmethod
    def sync(self) -> None:
        """Make every write so far durable on disk (one fsync for many unsynced writes)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; further calls are errors."""
