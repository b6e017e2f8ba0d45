"""Running a coroutine's first step now, on the caller's stack, and a Task only if it waits.

What Python 3.12's eager task factory does, for 3.11: `asyncio.create_task` runs a
coroutine's first step on the loop's next iteration, which under load is milliseconds away.
`start_now` runs it at once; a coroutine that finishes without waiting costs no Task, and one
that waits goes on in a Task that resumes it exactly as the Task would have (the outcome of
what it waited for, cancellation included, is read by the coroutine itself).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any


def start_now(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Step `coro` now; the Task finishing it, or None if it finished (or raised) already."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    try:
        waiting_for = context.run(coro.send, None)
    except StopIteration:
        return None
    except BaseException as error:  # noqa: BLE001 - as a Task would report it
        loop.call_exception_handler(
            {"message": "coroutine started eagerly raised", "exception": error}
        )
        return None
    task = loop.create_task(_resume(coro, waiting_for), context=context)
    # A Task cancelled before its first step never runs `_resume`, so never tells the
    # coroutine: closed then, its `finally` blocks run (a no-op once it finished).
    task.add_done_callback(lambda _: coro.close())
    return task


async def _resume(coro: Coroutine[Any, Any, None], waiting_for: Any) -> None:
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
