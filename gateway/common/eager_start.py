"""Running a coroutine's steps now, on the caller's stack, in the Task that finishes it.

What Python 3.12's eager task factory does, for 3.11: `asyncio.create_task` runs a
coroutine's first step on the loop's next iteration, which under load is milliseconds away.
`start_now` makes the Task and runs the first step at once with that Task as the current
one (so what looks for it finds it: aiohttp's client and `asyncio.timeout` need a current
task, and may cancel it); the Task's own first step, a turn later, then goes on from where
the coroutine waits, resuming it exactly as it would have (the outcome of what it waited
for, and cancellation, are read by the coroutine itself).

`resume_waiting` does the same for a later step. A Task waiting for a future resumes on the
iteration after the one that settled it: under load, after a whole round of reading new
requests. Whoever settles futures from a loop callback (the producer's delivery reports:
`AsyncProducer.add_settled_listener`) can hand them here, and a coroutine started by
`start_now` that waits for one of them takes its next step at once, in its Task, as that
Task would have; when the Task wakes, it goes on from wherever the coroutine then waits.
"""

from __future__ import annotations

import asyncio
import contextvars
from asyncio.tasks import _enter_task, _leave_task  # what 3.12's eager start uses too
from collections.abc import Coroutine, Iterable
from typing import Any

_RUNNING = object()  # the coroutine has not ended
_FINISHED = object()  # it returned

# The coroutines started by `start_now` that now wait for a future, by that future (one each:
# of two waiting for the same future, the later is resumed and the other left to its Task).
_WAITING: dict[asyncio.Future[Any], _Run] = {}


class _Run:
    """A coroutine driven step by step, by its Task (`_go_on`) or by `resume_waiting`."""

    __slots__ = ("coro", "context", "task", "waiting_for", "outcome", "steps")

    def __init__(self, coro: Coroutine[Any, Any, None], context: contextvars.Context) -> None:
        self.coro = coro
        self.context = context
        self.task: asyncio.Task[None] | None = None
        self.waiting_for: Any = None  # what the last step yielded: a future, or None
        self.outcome: Any = _RUNNING  # _FINISHED, or what the coroutine raised
        self.steps = 0

    def step(self, error: BaseException | None = None, in_task: bool = False) -> None:
        """One step of the coroutine (`error` thrown in where it waits): from its running
        Task (`in_task`), or from outside it, in the Task's context."""
        self.forget()  # what it waited for: it waits for something else after this step
        self.steps += 1
        try:
            if in_task:  # the Task runs in that context already, and it cannot be re-entered
                waiting_for = self.coro.send(None) if error is None else self.coro.throw(error)
            elif error is None:
                waiting_for = self.context.run(self.coro.send, None)
            else:
                waiting_for = self.context.run(self.coro.throw, error)
        except StopIteration:
            self.outcome = _FINISHED
            return
        except BaseException as raised:  # noqa: BLE001 - raised by the Task, as if it ran it
            self.outcome = raised
            return
        self.waiting_for = waiting_for
        if isinstance(waiting_for, asyncio.Future):
            _WAITING[waiting_for] = self

    def forget(self) -> None:
        """Drop the entry of what the coroutine waited for (a step moves it on)."""
        if _WAITING.get(self.waiting_for) is self:
            del _WAITING[self.waiting_for]

    def end(self) -> None:
        """The Task is done: close the coroutine (a no-op once it finished) and forget it."""
        self.forget()
        self.coro.close()


def start_now(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """Make the Task that runs `coro`, and run `coro`'s first step in it now."""
    loop = asyncio.get_running_loop()
    run = _Run(coro, contextvars.copy_context())
    task = loop.create_task(_go_on(run), context=run.context)
    run.task = task
    caller = asyncio.current_task(loop)  # none in a protocol callback; else set aside
    if caller is not None:
        _leave_task(loop, caller)
    _enter_task(loop, task)
    try:
        run.step()
    finally:
        _leave_task(loop, task)
        if caller is not None:
            _enter_task(loop, caller)
    # A Task cancelled before its first step never runs `_go_on`, so never tells the
    # coroutine: closed then, its `finally` blocks run (a no-op once it finished).
    task.add_done_callback(lambda _: run.end())
    return task


def resume_waiting(settled: Iterable[asyncio.Future[Any]]) -> None:
    """Step now the coroutines of `start_now` waiting for one of these settled futures.

    Called from a loop callback: inside a Task the other Task could not be entered, so the
    coroutines are left to their Tasks. A Task being cancelled is left to deliver it.
    """
    if not _WAITING:
        return
    loop = asyncio.get_running_loop()
    if asyncio.current_task(loop) is not None:
        return
    for future in settled:
        # An entry is made by the step that yielded the future and dropped by the next, so
        # its coroutine waits for it and has not ended.
        run = _WAITING.get(future)
        if run is None or not future.done():
            continue
        task = run.task
        assert task is not None  # set by `start_now` before the first step
        # Done: cancelled before its first step, its coroutine closed by a callback to come.
        if task.done() or task.cancelling():
            continue
        _enter_task(loop, task)
        try:
            run.step()
        finally:
            _leave_task(loop, task)


async def _go_on(run: _Run) -> None:
    while run.outcome is _RUNNING:
        waiting_for = run.waiting_for
        steps = run.steps
        try:
            if waiting_for is None:  # a bare `yield` (asyncio.sleep(0)): one loop turn
                await asyncio.sleep(0)
            else:
                # The coroutine's own `await` marked the future as awaited (as a Task's
                # step finds it); a Task clears the mark before waiting on it, so must this.
                waiting_for._asyncio_future_blocking = False
                await waiting_for
        except asyncio.CancelledError as cancel:
            if waiting_for is None or not waiting_for.cancelled():
                # This Task was cancelled, not what the coroutine waited for: tell it,
                # where it waits now.
                run.step(cancel, in_task=True)
                continue
        except BaseException:  # noqa: BLE001 - the coroutine reads the outcome itself
            pass
        if run.steps == steps:  # else `resume_waiting` took the step already
            run.step(in_task=True)
    if run.outcome is not _FINISHED:
        raise run.outcome
