"""Group commit: concurrent requests share one lease-store fsync, and share its failure.

Every test runs with the sync on the event loop and on its own thread (`in_thread`, one
gateway's default)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from gateway.group_sync import GroupSync


@pytest.fixture(params=[False, True], ids=["on-loop", "in-thread"])
def in_thread(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


class RecordingSync:
    """Counts the syncs and what had been written when each ran."""

    def __init__(self, fail: bool = False) -> None:
        self.written = 0
        self.covered: list[int] = []
        self.fail = fail

    def __call__(self) -> None:
        if self.fail:
            raise OSError("disk gone")
        self.covered.append(self.written)


async def test_requests_of_one_turn_share_one_sync_covering_all_their_writes(
    in_thread: bool,
) -> None:
    # Given ten requests that each write, then wait for durability, in the same turn
    sync = RecordingSync()
    group = GroupSync(sync, in_thread=in_thread)

    async def request() -> None:
        sync.written += 1
        await group.durable()

    # When
    await asyncio.gather(*(request() for _ in range(10)))

    # Then one sync ran, after all ten writes
    assert sync.covered == [10]
    assert (group.syncs, group.waiters) == (1, 10)


async def test_a_write_after_a_sync_started_waits_for_the_next_one(in_thread: bool) -> None:
    # Given a first request whose sync has run
    sync = RecordingSync()
    group = GroupSync(sync, in_thread=in_thread)
    sync.written += 1
    await group.durable()

    # When another request writes and waits
    sync.written += 1
    await group.durable()

    # Then it got a sync of its own, covering its write
    assert sync.covered == [1, 2]


async def test_a_failed_sync_fails_every_request_that_waited_for_it(in_thread: bool) -> None:
    group = GroupSync(RecordingSync(fail=True), in_thread=in_thread)
    outcomes = await asyncio.gather(group.durable(), group.durable(), return_exceptions=True)
    assert [type(o) for o in outcomes] == [OSError, OSError]
    assert group.syncs == 0


async def test_a_cancelled_waiter_does_not_cancel_the_sync_for_the_others(in_thread: bool) -> None:
    sync = RecordingSync()
    group = GroupSync(sync, in_thread=in_thread)
    first = asyncio.ensure_future(group.durable())
    second = asyncio.ensure_future(group.durable())
    await asyncio.sleep(0)  # both are waiting now
    first.cancel()
    await second
    with pytest.raises(asyncio.CancelledError):
        await first
    assert group.syncs == 1


async def test_with_a_confirmation_nobody_is_answered_before_it_completes(in_thread: bool) -> None:
    # Given a sync whose records must also be acknowledged elsewhere (several gateways)
    confirmation: concurrent.futures.Future[None] = concurrent.futures.Future()
    group = GroupSync(lambda: confirmation, in_thread=in_thread)
    waiters = [asyncio.ensure_future(group.durable()) for _ in range(3)]

    # When the sync has run but the acknowledgement has not come
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waiters)

    # Then they are answered once it comes, from another thread
    threading.Thread(target=confirmation.set_result, args=(None,)).start()
    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert group.syncs == 1


async def test_a_failed_confirmation_fails_every_request_that_waited_for_it(
    in_thread: bool,
) -> None:
    confirmation: concurrent.futures.Future[None] = concurrent.futures.Future()
    group = GroupSync(lambda: confirmation, in_thread=in_thread)
    waiters = [asyncio.ensure_future(group.durable()) for _ in range(2)]
    await asyncio.sleep(0)

    confirmation.set_exception(OSError("changelog not acknowledged"))
    outcomes = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)

    assert [type(o) for o in outcomes] == [OSError, OSError]


async def test_writes_made_while_a_sync_runs_on_its_thread_share_the_next_one() -> None:
    # Given a sync running on its thread, held there until released
    release = threading.Event()
    covered: list[int] = []
    written = [1]

    def slow_sync() -> None:
        covered.append(written[0])
        release.wait(5)

    group = GroupSync(slow_sync, in_thread=True)
    first = asyncio.ensure_future(group.durable())
    await asyncio.sleep(0.05)  # the first sync is running, covering one write

    # When two more requests write and wait meanwhile, in different turns (the loop is not
    # blocked)
    written[0] += 1
    second = asyncio.ensure_future(group.durable())
    await asyncio.sleep(0.01)
    written[0] += 1
    third = asyncio.ensure_future(group.durable())
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in (first, second, third))
    release.set()
    await asyncio.wait_for(asyncio.gather(first, second, third), 5)

    # Then they were answered after one more sync, which covered both their writes
    assert covered == [1, 3]
    assert group.syncs == 2
    group.close()
