"""Group commit: concurrent requests share one lease-store fsync, and share its failure."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from gateway.common.eager_start import start_now
from gateway.sqs.group_sync import GroupSync


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


async def test_requests_of_one_turn_share_one_sync_covering_all_their_writes() -> None:
    # Given ten requests that each write, then wait for durability, in the same turn
    sync = RecordingSync()
    group = GroupSync(sync)

    async def request() -> None:
        sync.written += 1
        await group.durable()

    # When
    await asyncio.gather(*(request() for _ in range(10)))

    # Then one sync ran, after all ten writes
    assert sync.covered == [10]
    assert (group.syncs, group.waiters) == (1, 10)


async def test_a_prompt_request_started_now_goes_on_inside_the_sync_s_own_callback() -> None:
    """A request the lean front started on its reading stack (`start_now`, as it starts
    deletes) that waits with `prompt` takes its next step in the sync's callback; one
    without it goes on when its Task wakes, on the loop's next turn."""
    # Given two requests started now that write, then wait for durability, one of them prompt
    sync = RecordingSync()
    group = GroupSync(sync)
    answered: list[str] = []
    seen_after_sync: list[list[str]] = []

    async def request(name: str, prompt: bool) -> None:
        sync.written += 1
        await group.durable(prompt)
        answered.append(name)

    def look() -> None:  # scheduled before the sync: runs right after it, in the same turn
        seen_after_sync.append(list(answered))

    # (the other first: its Task's own first step, waiting for the sync, runs before it)
    tasks = [start_now(request("later", False)), start_now(request("prompt", True))]
    asyncio.get_running_loop().call_soon(look)

    # When the sync has run
    await asyncio.gather(*tasks)

    # Then the prompt request had answered by the end of the sync's callback, the other after
    assert sync.covered == [2]
    assert seen_after_sync == [["prompt"]]
    assert answered == ["prompt", "later"]


async def test_a_write_after_a_sync_started_waits_for_the_next_one() -> None:
    # Given a first request whose sync has run
    sync = RecordingSync()
    group = GroupSync(sync)
    sync.written += 1
    await group.durable()

    # When another request writes and waits
    sync.written += 1
    await group.durable()

    # Then it got a sync of its own, covering its write
    assert sync.covered == [1, 2]


async def test_a_failed_sync_fails_every_request_that_waited_for_it() -> None:
    group = GroupSync(RecordingSync(fail=True))
    outcomes = await asyncio.gather(group.durable(), group.durable(), return_exceptions=True)
    assert [type(o) for o in outcomes] == [OSError, OSError]
    assert group.syncs == 0


async def test_a_cancelled_waiter_does_not_cancel_the_sync_for_the_others() -> None:
    sync = RecordingSync()
    group = GroupSync(sync)
    first = asyncio.ensure_future(group.durable())
    second = asyncio.ensure_future(group.durable())
    await asyncio.sleep(0)  # both are waiting now
    first.cancel()
    await second
    with pytest.raises(asyncio.CancelledError):
        await first
    assert group.syncs == 1


async def test_with_a_confirmation_nobody_is_answered_before_it_completes() -> None:
    # Given a sync whose records must also be acknowledged elsewhere (several gateways)
    confirmation: concurrent.futures.Future[None] = concurrent.futures.Future()
    group = GroupSync(lambda: confirmation)
    waiters = [asyncio.ensure_future(group.durable()) for _ in range(3)]

    # When the sync has run but the acknowledgement has not come
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waiters)

    # Then they are answered once it comes, from another thread
    threading.Thread(target=confirmation.set_result, args=(None,)).start()
    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert group.syncs == 1


async def test_a_failed_confirmation_fails_every_request_that_waited_for_it() -> None:
    confirmation: concurrent.futures.Future[None] = concurrent.futures.Future()
    group = GroupSync(lambda: confirmation)
    waiters = [asyncio.ensure_future(group.durable()) for _ in range(2)]
    await asyncio.sleep(0)

    confirmation.set_exception(OSError("changelog not acknowledged"))
    outcomes = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)

    assert [type(o) for o in outcomes] == [OSError, OSError]
