"""`PauseWatch`: a change waits after the event loop stood still, and only then."""

from __future__ import annotations

import asyncio

from gateway.cluster.pause_watch import PauseWatch
from tests.support.clocks import Monotonic

SETTLE_S = 0.2


async def waited(watch: PauseWatch) -> float:
    loop = asyncio.get_running_loop()
    began = loop.time()
    await watch.settled()
    return loop.time() - began


async def test_a_change_on_a_loop_that_keeps_running_does_not_wait() -> None:
    clock = Monotonic()
    watch = PauseWatch(clock, stall_s=3.0, settle_s=SETTLE_S)
    clock.now += 2.9  # busy, not stopped long enough to miss the group's session
    assert await waited(watch) < SETTLE_S / 2
    clock.now += 2.9
    assert await waited(watch) < SETTLE_S / 2


async def test_the_first_change_after_a_stall_waits_the_settle_time() -> None:
    clock = Monotonic()
    watch = PauseWatch(clock, stall_s=3.0, settle_s=SETTLE_S)
    clock.now += 7.0
    assert await waited(watch) >= SETTLE_S * 0.9


async def test_changes_during_the_settle_time_wait_its_rest_and_later_ones_do_not() -> None:
    # Given a stall the event loop's tick noticed
    clock = Monotonic()
    watch = PauseWatch(clock, stall_s=3.0, settle_s=SETTLE_S)
    watch.start(asyncio.get_running_loop())
    try:
        clock.now += 7.0
        await asyncio.sleep(0.4)  # the tick (every 0.25 s) runs and notices
        # When a change asks within the settle time (on the watch's clock), then after it
        clock.now += SETTLE_S / 2
        during = await waited(watch)
        clock.now += SETTLE_S
        after = await waited(watch)
    finally:
        watch.stop()

    # Then the first waits the rest of it, the second not at all
    assert SETTLE_S * 0.4 <= during <= SETTLE_S * 0.9
    assert after < SETTLE_S / 4
