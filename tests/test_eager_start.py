"""`start_now` (`gateway/eager_start.py`): a coroutine's first step on the caller's stack, in
the Task that then runs the rest as if it had run it from the start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.eager_start import start_now


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
