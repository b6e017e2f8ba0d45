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
        self._pending: asyncio.Future[None] | None = None
        self.syncs = 0  # fsyncs performed, for tests and metrics
        self.waiters = 0  # requests that waited for one

    async def durable(self) -> None:
        """Return once every write made so far is durable; raises what the sync raised."""
        self.waiters += 1
        if self._pending is None:
            loop = asyncio.get_running_loop()
            self._pending = loop.create_future()
            # call_soon: requests already runnable in this turn write first, then join.
            loop.call_soon(self._run, self._pending)
        await asyncio.shield(self._pending)

    def _run(self, pending: asyncio.Future[None]) -> None:
        self._pending = None  # writes from now on need the next sync
        try:
            self._sync()
            self.syncs += 1
        except Exception as error:  # noqa: BLE001 - handed to every waiter
            pending.set_exception(error)
            pending.exception()  # retrieved: a waiter that was cancelled must not log it
            return
        pending.set_result(None)
