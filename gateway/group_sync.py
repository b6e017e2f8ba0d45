"""Group commit: the requests of one event-loop turn share one fsync of the lease store.

DeleteMessage and ChangeMessageVisibility may only be answered once their lease-store write
is on disk. Syncing each write costs one fsync per message — ten in a row, on the event
loop, for a DeleteMessageBatch — and every other request waits behind them. Instead they
write unsynced and await `durable()`: the first waiter of a turn schedules a single sync
for the end of the turn, and every write made before it runs is covered by it (a WAL sync
makes everything written so far durable). Nothing is acknowledged earlier than before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class GroupSync:
    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        # The waiters of the sync scheduled for the end of this turn; None when none is.
        # Each has its own future, so a cancelled request cancels only its own wait.
        self._waiting: list[asyncio.Future[None]] | None = None
        self.syncs = 0  # fsyncs performed, for tests and metrics
        self.waiters = 0  # requests that waited for one

    async def durable(self) -> None:
        """Return once every write made so far is durable; raises what the sync raised."""
        self.waiters += 1
        loop = asyncio.get_running_loop()
        if self._waiting is None:
            self._waiting = []
            # call_soon: requests already runnable in this turn write first, then join.
            loop.call_soon(self._run)
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        await waiter

    def _run(self) -> None:
        waiting, self._waiting = self._waiting or [], None  # later writes need the next sync
        try:
            self._sync()
            self.syncs += 1
        except Exception as error:  # noqa: BLE001 - handed to every waiter
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_exception(error)
                    waiter.exception()  # retrieved: nobody else logs it
            return
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)
