"""Long-poll wake-ups: receives parked on a queue wake when something may have become visible.

Wake-ups come from events, not polling: a record ingested into the queue, a visibility
change, the queue being deleted, or the waiter's own timer set to the earliest moment a lease
or delay ends (the caller computes it from the lease store's in-memory visibility).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class QueueSignals:
    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._closed = False

    def close(self) -> None:
        """Shutting down: wake everyone, and from now on never park."""
        self._closed = True
        for key in list(self._waiting):
            self.notify(key)

    @property
    def closed(self) -> bool:
        return self._closed

    def notify(self, queue_key: str) -> None:
        """Wake every receive parked on the queue."""
        for future in self._waiting.pop(queue_key, ()):
            if not future.done():
                future.set_result(None)

    async def wait(self, queue_key: str, timeout_s: float) -> bool:
        """Park until notified or `timeout_s` passes; True when notified."""
        if timeout_s <= 0 or self._closed:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._waiting[queue_key]
        waiting.add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            waiting.discard(future)
            if not waiting and self._waiting.get(queue_key) is waiting:
                del self._waiting[queue_key]

    def waiting(self, queue_key: str) -> int:
        return len(self._waiting.get(queue_key, ()))

    @property
    def parked(self) -> int:
        """Receives parked on any queue now."""
        return sum(len(waiting) for waiting in self._waiting.values())
