"""What a delete needs of recently received messages, so it need not read them back.

A deletion's event names the message, and its expiry-index key holds its SentTimestamp.
Reading them from the store costs a read of the whole stored message (~1 KB, the largest read
of a delete) to get 36 bytes, and a read of its lease fact for 8; the receive that handed out
the receipt handle had both in hand moments before. Neither ever changes: an offset of a queue
partition is one Kafka record, so an entry can never go stale (a re-created queue has a new
partition prefix); the memory is bounded by keeping two generations of at most `size`
entries each and dropping the older one whole when the newer one fills.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """A map of what was remembered lately: two generations of at most `size` entries, the
    older dropped whole when the newer fills (also the receipt handles a codec issued)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._new: dict[K, V] = {}
        self._old: dict[K, V] = {}

    def remember(self, key: K, value: V) -> None:
        if len(self._new) >= self._size:
            self._old, self._new = self._new, {}
        self._new[key] = value

    def get(self, key: K) -> V | None:
        found = self._new.get(key)
        return found if found is not None else self._old.get(key)

    def take(self, key: K) -> V | None:
        """What was remembered under `key`, forgotten here."""
        found = self._new.pop(key, None)
        return found if found is not None else self._old.pop(key, None)

    def __len__(self) -> int:
        return len(self._new) + len(self._old)


class RecentIds(Recent[tuple[bytes, int], tuple[str, int]]):
    """`(MessageId, SentTimestamp)` of recently received messages, by `(partition prefix,
    offset)`. `take` forgets what it returns (the message is being deleted). The `Recent`
    methods themselves, not wrappers: they run for every message received and deleted."""

    def __init__(self, size: int = 50_000) -> None:
        super().__init__(size)
