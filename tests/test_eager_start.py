"""`start_now` (`gateway/eager_start.py`): a coroutine's first step on the caller's stack, and
the rest in a Task that behaves as if the Task had run it from the start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.eager_start import start_now


async def test_a_coroutine_that_never_waits_runs_at_once_without_a_task() -> None:
    steps: list[str] = []

    async def quick() -> None:
        steps.append("ran")

    assert start_now(quick()) is None
    assert steps == ["ran"]


async def test_a_waiting_coroutine_runs_its_first_step_now_and_the_rest_in_a_task() -> None:
    loop = asyncio.get_running_loop()
    steps: list[Any] = []
    first = loop.create_future()
    second = loop.create_future()

    async def waits() -> None:
        steps.append(("first step in", asyncio.current_task()))
        steps.append(await first)
        done, _ = await asyncio.wait([second])  # waits on a future of its own making
        steps.append(done.pop().result())
        await asyncio.sleep(0)  # a bare yield
        await asyncio.sleep(0.001)
        steps.append(("later steps in", asyncio.current_task()))

    caller = asyncio.current_task()
    task = start_now(waits())
    assert task is not None
    assert steps == [("first step in", caller)]  # run before start_now returned
    first.set_result(1)
    loop.call_later(0.01, second.set_result, 2)
    await asyncio.wait_for(task, 5)
    assert steps == [("first step in", caller), 1, 2, ("later steps in", task)]


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
    assert task is not None
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
    assert task is not None
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
    assert task is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)  # the done callbacks
    assert seen == ["finally"]


async def test_a_first_step_that_raises_is_reported_to_the_loop() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))

    async def broken() -> None:
        raise RuntimeError("broken")

    try:
        assert start_now(broken()) is None
    finally:
        loop.set_exception_handler(None)
    assert [str(c["exception"]) for c in reported] == ["broken"]
