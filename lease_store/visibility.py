"""Which messages of one queue partition are visible, and when the others will be: in memory.

Every live message of a partition is in exactly one of two places:

* **ready**: visible as of the partition's last sweep, ordered by offset, so a receive takes
  the oldest first (a message whose lease expired comes before a newer one sent meanwhile,
  as SQS does in practice, and as FIFO needs); `ready_set.py`;
* **waiting**: hidden until its `visible_at_ms` (a lease, a delay, a dead-letter or move-task
  hold), with whether it was ever received, which tells in-flight from delayed.

A sweep moves what fell due from waiting to ready. The counts are the sizes of these sets,
so they are exact by construction.

Nothing here is durable. The lease facts (the `F` keys) are the record; `LeaseStore` builds
this from them the first time it touches a partition (`from_facts`), and a crash loses
nothing that a fact does not say. Until format 2 these indexes were RocksDB keys too: 4 of the
~11 writes of a message's life (ready at ingest, ready → waiting at a receive, waiting gone at
the delete), tombstones that every scan walked over, and a floor per region to skip them.

The waiting set's order is a heap of `(visible_at_ms, offset)` in which an entry can be
stale: the message was deleted or its lease changed after it was pushed (it then has a
newer entry). Stale entries are skipped when they reach the top, and the heap is rebuilt
when they outnumber the live ones, so its size stays within twice the waiting set's.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from lease_store.ready_set import ReadySet

# Below this many entries a heap full of stale ones costs nothing worth a rebuild.
_MIN_REBUILD = 1024


class PartitionVisibility:
    __slots__ = ("_delayed", "_due", "_ready", "_redelivered", "_waiting")

    def __init__(self) -> None:
        self._ready = ReadySet()
        # Ready offsets received before (their lease ended): few, unlike the never-received
        # backlog, whose lease facts are still what ingest derived from the message.
        self._redelivered: set[int] = set()
        self._waiting: dict[int, int] = {}  # offset -> visible_at_ms
        self._delayed: set[int] = set()  # waiting offsets never received
        self._due: list[tuple[int, int]] = []  # (visible_at_ms, offset), min-heap, may be stale

    @classmethod
    def from_facts(
        cls, facts: Iterable[tuple[int, int, int]], swept_until_ms: int
    ) -> PartitionVisibility:
        """Built from every live message's `(offset, visible_at_ms, receive_count)`."""
        vis = cls()
        ready: list[int] = []
        for offset, visible_at_ms, receive_count in facts:
            if visible_at_ms <= swept_until_ms:
                ready.append(offset)
                if receive_count:
                    vis._redelivered.add(offset)
            else:
                vis._waiting[offset] = visible_at_ms
                if receive_count == 0:
                    vis._delayed.add(offset)
        vis._ready = ReadySet(ready)
        vis._due = [(at_ms, offset) for offset, at_ms in vis._waiting.items()]
        heapq.heapify(vis._due)
        return vis

    # -- the counts ------------------------------------------------------------------------

    @property
    def visible(self) -> int:
        return len(self._ready)

    @property
    def in_flight(self) -> int:
        return len(self._waiting) - len(self._delayed)

    @property
    def delayed(self) -> int:
        return len(self._delayed)

    # -- reading ---------------------------------------------------------------------------

    def __contains__(self, offset: int) -> bool:
        """Whether the message at `offset` is live (it has a lease fact)."""
        return offset in self._waiting or offset in self._ready

    def first_ready(self, limit: int) -> list[int]:
        """The `limit` oldest visible offsets (complete only right after a sweep)."""
        return self._ready.first(limit)

    def was_received(self, offset: int) -> bool:
        """Whether a ready message was ever received (its receive count is not 0)."""
        return offset in self._redelivered

    def ready_in_order(self) -> Iterator[int]:
        """The visible offsets, oldest first; the set must not change while this is read."""
        return iter(self._ready)

    def next_due_ms(self) -> int | None:
        """When the first waiting message becomes visible, if any waits."""
        due = self._due
        while due:
            at_ms, offset = due[0]
            if self._waiting.get(offset) == at_ms:
                return at_ms
            heapq.heappop(due)  # stale
        return None

    # -- changing --------------------------------------------------------------------------

    def add(self, offset: int, visible_at_ms: int, received: bool, swept_until_ms: int) -> None:
        """A message (not already here) whose lease says it is visible at `visible_at_ms`."""
        if visible_at_ms <= swept_until_ms:
            self._ready.add(offset)
            if received:
                self._redelivered.add(offset)
            return
        self._waiting[offset] = visible_at_ms
        if not received:
            self._delayed.add(offset)
        heapq.heappush(self._due, (visible_at_ms, offset))

    def remove(self, offset: int) -> None:
        """Forget a message (deleted, or about to be added again with a new lease)."""
        if self._waiting.pop(offset, None) is None:
            self._ready.discard(offset)
            self._redelivered.discard(offset)
            return
        self._delayed.discard(offset)
        if len(self._due) > max(_MIN_REBUILD, 2 * len(self._waiting)):
            self._due = [(at_ms, o) for o, at_ms in self._waiting.items()]
            heapq.heapify(self._due)

    def sweep(self, now_ms: int) -> int:
        """Move every message visible at `now_ms` to ready; returns how many moved."""
        due, waiting = self._due, self._waiting
        moved = 0
        while due and due[0][0] <= now_ms:
            at_ms, offset = heapq.heappop(due)
            if waiting.get(offset) != at_ms:
                continue  # stale: deleted, or leased again since
            del waiting[offset]
            if offset in self._delayed:
                self._delayed.remove(offset)
            else:
                self._redelivered.add(offset)
            self._ready.add(offset)
            moved += 1
        return moved
