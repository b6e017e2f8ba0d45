"""Running a coroutine's first step now, on the caller's stack, in the Task that finishes it.

What Python 3.12's eager task factory does, for 3.11: `asyncio.create_task` runs a
coroutine's first step on the loop's next iteration, which under load is milliseconds away.
`start_now` makes the Task and runs the first step at once with that Task as the current
one (so what looks for it finds it: aiohttp's client and `asyncio.timeout` need a current
task, and may cancel it); the Task's own first step, a turn later, then goes on from where
the coroutine waits, resuming it exactly as it would have (the outcome of what it waited
for, and cancellation, are read by the coroutine itself).
"""

from __future__ import annotations

import asyncio
import contextvars
from asyncio.tasks import _enter_task, _leave_task  # what 3.12's eager start uses too
from collections.abc import Coroutine
from typing import Any

_FINISHED = object()  # the first step ended the coroutine


def start_now(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """Make the Task that runs `coro`, and run `coro`'s first step in it now."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    first: list[Any] = []  # what the first step waits for, _FINISHED, or what it raised
    task = loop.create_task(_go_on(coro, first), context=context)
    caller = asyncio.current_task(loop)  # none in a protocol callback; else set aside
    if caller is not None:
        _leave_task(loop, caller)
    _enter_task(loop, task)
    try:
        first.append(context.run(coro.send, None))
    except StopIteration:
        first.append(_FINISHED)
    except BaseException as error:  # noqa: BLE001 - raised by the Task, as if it ran it
        first.append(error)
    finally:
        _leave_task(loop, task)
        if caller is not None:
            _enter_task(loop, caller)
    # A Task cancelled before its first step never runs `_go_on`, so never tells the
    # coroutine: closed then, its `finally` blocks run (a no-op once it finished).
    task.add_done_callback(lambda _: coro.close())
    return task


async def _go_on(coro: Coroutine[Any, Any, None], first: list[Any]) -> None:
    (waiting_for,) = first
    if waiting_for is _FINISHED:
        return
    if isinstance(waiting_for, BaseException):
        raise waiting_for
    while True:
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
                # This Task was cancelled, not what the coroutine waited for: tell it.
                try:
                    waiting_for = coro.throw(cancel)
                except StopIteration:
                    return
                continue
        except BaseException:  # noqa: BLE001 - the coroutine reads the outcome itself
            pass
        try:
            waiting_for = coro.send(None)
        except StopIteration:
            return
