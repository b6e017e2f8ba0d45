"""`start_now` (`gateway/common/eager_start.py`): a coroutine's first step on the caller's stack, in
the Task that then runs the rest as if it had run it from the start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.common.eager_start import resume_waiting, start_now


async def test_a_coroutine_that_never_waits_runs_at_once() -> None:
    steps: list[str] = []

    async def quick() -> None:
        steps.append("ran")

    task = start_now(quick())
    assert steps == ["ran"]
    await asyncio.wait_for(task, 5)  # and its Task ends without running it again
    assert steps == ["ran"]


async def test_the_first_step_runs_now_in_the_task_that_runs_the_rest() -> None:
    """The Task is current from the first step on: aiohttp's client and `asyncio.timeout`
    look for it (and may cancel it)."""
    loop = asyncio.get_running_loop()
    steps: list[Any] = []
    first = loop.create_future()
    second = loop.create_future()

    async def waits() -> None:
        steps.append(("first step in", asyncio.current_task()))
        async with asyncio.timeout(5):
            steps.append(await first)
        done, _ = await asyncio.wait([second])  # waits on a future of its own making
        steps.append(done.pop().result())
        await asyncio.sleep(0)  # a bare yield
        await asyncio.sleep(0.001)
        steps.append(("later steps in", asyncio.current_task()))

    caller = asyncio.current_task()
    task = start_now(waits())
    assert steps == [("first step in", task)]  # run before start_now returned
    assert asyncio.current_task() is caller
    first.set_result(1)
    loop.call_later(0.01, second.set_result, 2)
    await asyncio.wait_for(task, 5)
    assert steps == [("first step in", task), 1, 2, ("later steps in", task)]


async def test_what_the_coroutine_waited_for_failing_is_raised_inside_it() -> None:
    loop = asyncio.get_running_loop()
    failing = loop.create_future()
    caught: list[BaseException] = []

    async def waits() -> None:
        try:
            await failing
        except ValueError as error:
            caught.append(error)

    task = start_now(waits())
    failing.set_exception(ValueError("no"))
    await asyncio.wait_for(task, 5)
    assert [str(e) for e in caught] == ["no"]


@pytest.mark.parametrize("awaited_done", [False, True], ids=["pending", "done"])
async def test_cancelling_the_task_cancels_the_coroutine(awaited_done: bool) -> None:
    """Whether what it waits for is pending (cancelled with the task) or already done when
    the cancel comes, the coroutine sees CancelledError where it waits, as under a Task."""
    loop = asyncio.get_running_loop()
    awaited = loop.create_future()
    seen: list[str] = []

    async def waits() -> None:
        try:
            await awaited
            seen.append("resumed")
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = start_now(waits())
    await asyncio.sleep(0)  # the task is waiting now
    if awaited_done:
        awaited.set_result(None)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


async def test_a_task_cancelled_before_its_first_step_closes_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    seen: list[str] = []

    async def waits() -> None:
        try:
            await loop.create_future()
        finally:
            seen.append("finally")

    task = start_now(waits())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)  # the done callbacks
    assert seen == ["finally"]


async def test_a_first_step_that_raises_fails_the_task() -> None:
    async def broken() -> None:
        raise RuntimeError("broken")

    task = start_now(broken())
    with pytest.raises(RuntimeError, match="broken"):
        await task


# -- resume_waiting: a later step taken by whoever settled what the coroutine waits for --


async def test_a_settled_future_resumes_its_waiter_at_once_in_its_task() -> None:
    """Settled from a loop callback and handed to `resume_waiting`, the coroutine's next
    step runs before that callback returns, with its Task current; the Task, when it
    wakes, goes on from where the coroutine waits then, without taking the step again."""
    loop = asyncio.get_running_loop()
    first = loop.create_future()
    second = loop.create_future()
    steps: list[Any] = []

    async def waits() -> None:
        steps.append(("got", await first, asyncio.current_task()))
        steps.append(("got", await second, asyncio.current_task()))

    task = start_now(waits())
    resumed_in_callback: list[Any] = []

    def settle(future: asyncio.Future[int], value: int) -> None:  # a loop callback
        future.set_result(value)
        resume_waiting([future])
        resumed_in_callback.append(list(steps))

    loop.call_soon(settle, first, 1)
    await asyncio.sleep(0.01)
    assert resumed_in_callback == [[("got", 1, task)]]
    assert not task.done()  # it waits for `second` now
    loop.call_soon(second.set_result, 2)  # settled without `resume_waiting`: the Task steps
    await asyncio.wait_for(task, 5)
    assert steps == [("got", 1, task), ("got", 2, task)]


async def test_a_coroutine_that_ends_in_a_resumed_step_ends_its_task() -> None:
    loop = asyncio.get_running_loop()
    awaited = loop.create_future()
    seen: list[str] = []

    async def waits() -> None:
        await awaited
        seen.append("ended")

    task = start_now(waits())

    def settle() -> None:
        awaited.set_result(None)
        resume_waiting([awaited])
        seen.append("callback returned")

    loop.call_soon(settle)
    await asyncio.wait_for(task, 5)
    assert seen == ["ended", "callback returned"]
    assert task.result() is None


async def test_an_error_raised_in_a_resumed_step_fails_the_task() -> None:
    loop = asyncio.get_running_loop()
    awaited = loop.create_future()

    async def waits() -> None:
        await awaited
        raise RuntimeError("after the wait")

    task = start_now(waits())

    def settle() -> None:
        awaited.set_result(None)
        resume_waiting([awaited])

    loop.call_soon(settle)
    with pytest.raises(RuntimeError, match="after the wait"):
        await asyncio.wait_for(task, 5)


async def test_inside_a_task_or_while_cancelling_the_waiter_is_left_to_its_task() -> None:
    """Another Task cannot be entered from inside one; a Task being cancelled delivers the
    cancellation where the coroutine waits, as it would have."""
    loop = asyncio.get_running_loop()
    first = loop.create_future()
    second = loop.create_future()
    seen: list[str] = []

    async def waits() -> None:
        await first
        seen.append("first")
        try:
            await second
            seen.append("second")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = start_now(waits())
    first.set_result(None)
    resume_waiting([first])  # from this test's own Task: not stepped here
    assert seen == []
    await asyncio.sleep(0.01)
    assert seen == ["first"]  # its Task took the step

    def settle_while_cancelling() -> None:
        second.set_result(None)
        task.cancel()  # after: cancelling it would cancel `second`, which its Task awaits
        resume_waiting([second])
        seen.append("callback returned")

    loop.call_soon(settle_while_cancelling)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["first", "callback returned", "cancelled"]


async def test_futures_nobody_started_now_waits_for_are_ignored() -> None:
    loop = asyncio.get_running_loop()
    other = loop.create_future()
    other.set_result(None)
    results: list[BaseException | None] = []

    def settle() -> None:
        try:
            resume_waiting([other])
            results.append(None)
        except BaseException as error:  # noqa: BLE001 - the assertion reads it
            results.append(error)

    loop.call_soon(settle)
    await asyncio.sleep(0.01)
    assert results == [None]


async def test_nothing_is_kept_for_a_coroutine_once_its_task_is_done() -> None:
    """What each coroutine waits for is forgotten as it steps on, however its Task ended:
    resumed, stepped by its Task, cancelled after a resumed step."""
    from gateway.common import eager_start

    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(4)]

    async def waits_twice(first: asyncio.Future[None], then: asyncio.Future[None]) -> None:
        await first
        await then

    resumed = start_now(waits_twice(futures[0], futures[1]))
    cancelled = start_now(waits_twice(futures[2], futures[3]))
    assert len(eager_start._WAITING) == 2

    def settle() -> None:
        for future in futures[0], futures[2]:
            future.set_result(None)
        resume_waiting([futures[0], futures[2]])  # both now wait for their second future

    loop.call_soon(settle)
    await asyncio.sleep(0.01)
    assert set(eager_start._WAITING) == {futures[1], futures[3]}
    futures[1].set_result(None)  # its Task takes that step
    cancelled.cancel()
    await asyncio.wait_for(resumed, 5)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await asyncio.sleep(0)  # the done callbacks
    assert eager_start._WAITING == {}
