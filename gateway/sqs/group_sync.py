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
import concurrent.futures
from collections.abc import Callable

from gateway.common.eager_start import resume_waiting


class GroupSync:
    def __init__(self, sync: Callable[[], concurrent.futures.Future[None] | None]) -> None:
        # `sync` makes the writes durable; the future it may return must complete first too.
        self._sync = sync
        # The waiters of the sync scheduled for the end of this turn; None when none is.
        # Each has its own future, so a cancelled request cancels only its own wait.
        self._waiting: list[asyncio.Future[None]] | None = None
        # Those of them to resume from the sync's callback (`durable(prompt=True)`).
        self._prompt: list[asyncio.Future[None]] = []
        self.syncs = 0  # fsyncs performed, for tests and metrics
        self.waiters = 0  # requests that waited for one

    async def durable(self, prompt: bool = False) -> None:
        """Return once every write made so far is durable; raises what the sync raised.

        With `prompt`, a caller started on the reading stack (`eager_start.start_now`) takes
        its next step in the sync's own callback, not on the loop's next turn."""
        self.waiters += 1
        loop = asyncio.get_running_loop()
        if self._waiting is None:
            self._waiting = []
            # call_soon: requests already runnable in this turn write first, then join.
            loop.call_soon(self._run)
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        if prompt:
            self._prompt.append(waiter)
        await waiter

    def _run(self) -> None:
        waiting, self._waiting = self._waiting or [], None  # later writes need the next sync
        prompt, self._prompt = self._prompt, []
        try:
            confirmation = self._sync()
            self.syncs += 1
        except Exception as error:  # noqa: BLE001 - handed to every waiter
            _settle(waiting, error)
            return
        if confirmation is None or confirmation.done() and confirmation.exception() is None:
            _settle(waiting, None)
            resume_waiting(prompt)
            return
        # The sync's records must also be acknowledged elsewhere (several gateways: the
        # lease changelog) before anyone is answered.
        asyncio.wrap_future(confirmation).add_done_callback(
            lambda done: _settle(waiting, None if done.cancelled() else done.exception())
        )


def _settle(waiting: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for waiter in waiting:
        if waiter.done():
            continue
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)
            waiter.exception()  # retrieved: nobody else logs it
