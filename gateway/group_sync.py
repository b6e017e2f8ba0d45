"""Group commit: the requests of one event-loop turn share one fsync of the lease store.

DeleteMessage and ChangeMessageVisibility may only be answered once their lease-store write
is on disk. Syncing each write costs one fsync per message — ten in a row, on the event
loop, for a DeleteMessageBatch — and every other request waits behind them. Instead they
write unsynced and await `durable()`: the first waiter of a turn schedules a single sync
for the end of the turn, and every write made before it runs is covered by it (a WAL sync
makes everything written so far durable). Nothing is acknowledged earlier than before.

With `in_thread` the fsync runs on a thread of its own (RocksDB releases the GIL while it
syncs) instead of on the event loop, which meanwhile goes on answering other requests. One
sync runs at a time: the requests that wait while it runs share the next one, which starts
when it ends and covers every write made before that.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable

Sync = Callable[[], concurrent.futures.Future[None] | None]
# What a sync returned, or the exception it raised.
Ran = Callable[[concurrent.futures.Future[None] | None, BaseException | None], None]


class _SyncThread:
    """A thread that runs the syncs handed to it, one at a time, and reports each back to its
    event loop. Leaner than an executor's future chain: per sync, valgrind counted ~112,000
    more instructions with a ThreadPoolExecutor and `run_in_executor` than on the loop,
    ~19,000 with this thread (`bench.micro.instructions`, cycle10, PROFILE.md session 18)."""

    def __init__(self, sync: Sync) -> None:
        self._sync = sync
        self._jobs: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, Ran] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._serve, name="kqs-wal-sync", daemon=True)
        self._thread.start()

    def submit(self, loop: asyncio.AbstractEventLoop, ran: Ran) -> None:
        self._jobs.put((loop, ran))

    def close(self) -> None:
        """Wait for the sync running, if any; the thread ends."""
        self._jobs.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, ran = job
            result: concurrent.futures.Future[None] | None = None
            error: BaseException | None = None
            try:
                result = self._sync()
            except Exception as exc:  # noqa: BLE001 - handed to the waiters
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(ran, result, error)


class GroupSync:
    def __init__(self, sync: Sync, in_thread: bool = False) -> None:
        # `sync` makes the writes durable; the future it may return must complete first too.
        self._sync = sync
        self._thread = _SyncThread(sync) if in_thread else None
        self._syncing = False  # a sync is running on the thread
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

    def close(self) -> None:
        """Wait for a sync still running on the thread (before the lease store closes)."""
        if self._thread is not None:
            self._thread.close()

    def _run(self) -> None:
        if self._syncing:
            return  # these waiters stay in `_waiting`; the running sync's end starts theirs
        waiting, self._waiting = self._waiting or [], None  # later writes need the next sync
        if self._thread is None:
            try:
                confirmation = self._sync()
            except Exception as error:  # noqa: BLE001 - handed to every waiter
                _settle(waiting, error)
                return
            self._synced(waiting, confirmation)
            return
        self._syncing = True
        self._thread.submit(
            asyncio.get_running_loop(),
            lambda confirmation, error: self._ran(waiting, confirmation, error),
        )

    def _ran(
        self,
        waiting: list[asyncio.Future[None]],
        confirmation: concurrent.futures.Future[None] | None,
        error: BaseException | None,
    ) -> None:
        self._syncing = False
        if error is not None:
            _settle(waiting, error)
        else:
            self._synced(waiting, confirmation)
        if self._waiting:
            self._run()  # those who wrote while it ran: one sync for all of them

    def _synced(
        self,
        waiting: list[asyncio.Future[None]],
        confirmation: concurrent.futures.Future[None] | None,
    ) -> None:
        self.syncs += 1
        if confirmation is None or confirmation.done() and confirmation.exception() is None:
            _settle(waiting, None)
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
