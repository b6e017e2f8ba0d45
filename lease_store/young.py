"""Young messages: ingested, held in memory, not yet written to the key-value store.

Under a consumer that keeps up, a message lives for tens of milliseconds: sent, received,
deleted. Writing its fact, stored copy and expiry entry at ingest, its fact again at the
receive and three deletes at the end cost more than everything else the lease store does
for it (bench/results/archive/profile-journal.md, 2026-11-28 (b6e3cb9): with none of those writes, workload (b) moved
1.25x the messages). A young message is kept here instead; if it is still live after
`max_age_ms` (or when too many are held) the store writes it like any other.

What makes this safe is the partition's applied offset on disk: while a partition holds
young messages, its state is written with the applied offset one below the lowest of them,
so after a crash ingest replays them from Kafka (the queue topic is their durable record).
A young message deleted in the meantime leaves a marker key (`D`), written in the delete's
own batch and so synced with it, by which the replay skips it: an acknowledged delete is
never undone. What a crash can lose is a young message's receive (it is delivered again,
as at-least-once allows). A visibility change, which is synced, writes the partition's
young messages first.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from lease_store.records import LeaseFact, StoredMessage

K = TypeVar("K", bound=Hashable)


# What a held message costs besides its body (its objects, its entry).
_OVERHEAD_BYTES = 512


@dataclass(slots=True)
class Young:
    message: StoredMessage
    fact: LeaseFact  # the message's lease fact as it stands (ingested, then leased...)
    ingested_ms: int


class YoungMessages(Generic[K]):
    """The young messages of every partition (keyed by `K`), lowest offset first in each."""

    def __init__(
        self, max_age_ms: int, max_count: int = 100_000, max_bytes: int = 64 * 1024 * 1024
    ) -> None:
        self.max_age_ms = max_age_ms
        self._max_count = max_count
        self._max_bytes = max_bytes
        self.count = 0
        self.bytes = 0  # of the bodies held, plus an overhead per message
        # Offsets arrive in increasing order per partition and leave from anywhere, so each
        # dict's first key is its lowest offset.
        self._of: dict[K, dict[int, Young]] = {}
        # When each partition's oldest entry came, in the order partitions got one.
        self._since: dict[K, int] = {}

    def of(self, pk: K) -> dict[int, Young] | None:
        return self._of.get(pk)

    def get(self, pk: K, offset: int) -> Young | None:
        held = self._of.get(pk)
        return held.get(offset) if held else None

    def add(self, pk: K, offset: int, young: Young) -> None:
        held = self._of.get(pk)
        if held is None:
            held = self._of[pk] = {}
        if not held:
            self._since.pop(pk, None)  # to the end: `due` reads them in time order
            self._since[pk] = young.ingested_ms
        held[offset] = young
        self.count += 1
        self.bytes += len(young.message.body) + _OVERHEAD_BYTES

    def pop(self, pk: K, offset: int) -> Young | None:
        held = self._of.get(pk)
        if not held:
            return None
        young = held.pop(offset, None)
        if young is not None:
            self.count -= 1
            self.bytes -= len(young.message.body) + _OVERHEAD_BYTES
        return young

    def lowest(self, pk: K) -> int | None:
        held = self._of.get(pk)
        return next(iter(held)) if held else None

    def oldest_sent_ms(self, pk: K) -> int | None:
        held = self._of.get(pk)
        return min(young.fact.sent_ms for young in held.values()) if held else None

    def due(self, now_ms: int) -> list[K]:
        """The partitions holding a message older than `max_age_ms` (all of them when more
        than `max_count` messages or `max_bytes` are held), oldest first."""
        if self._crowded():
            return list(self._since)
        cutoff = now_ms - self.max_age_ms
        due = []
        for pk, since in self._since.items():
            if since > cutoff:
                break  # roughly in time order: the rest came later
            due.append(pk)
        return due

    def take_due(self, pk: K, now_ms: int) -> list[tuple[int, Young]]:
        """Take the partition's messages older than `max_age_ms`, lowest offset first (all
        of them when too many are held)."""
        held = self._of.get(pk)
        if not held:
            self._since.pop(pk, None)
            return []
        cutoff = None if self._crowded() else now_ms - self.max_age_ms
        taken = []
        for offset, young in held.items():
            if cutoff is not None and young.ingested_ms > cutoff:
                break
            taken.append((offset, young))
        for offset, young in taken:
            del held[offset]
            self.bytes -= len(young.message.body) + _OVERHEAD_BYTES
        self.count -= len(taken)
        self._since.pop(pk, None)
        if held:
            self._since[pk] = next(iter(held.values())).ingested_ms  # to the end: later
        return taken

    def take_all(self, pk: K) -> list[tuple[int, Young]]:
        held = self._of.pop(pk, None)
        self._since.pop(pk, None)
        if not held:
            return []
        self.count -= len(held)
        self.bytes -= sum(len(young.message.body) + _OVERHEAD_BYTES for young in held.values())
        return list(held.items())

    def _crowded(self) -> bool:
        return self.count > self._max_count or self.bytes > self._max_bytes

    def partitions(self) -> list[K]:
        return [pk for pk, held in self._of.items() if held]
