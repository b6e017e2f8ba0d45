"""Noticing that this gateway stood still long enough to have lost its partitions.

A gateway whose process stops (SIGSTOP, a stalled VM or host, a swap storm) for longer than
the ingest group's session timeout is evicted: the group gives its partitions to the other
gateways, which restore them from the changelog. On waking, the gateway still believes it
serves them until librdkafka finds its session expired (at once, on its first timer) and
the loss reaches the event loop (`GroupOwnership.lost`, through the ingest thread). In that
gap the loop answers what waited in its sockets: a delete made then whose changelog record
Kafka acknowledged before the loss dropped it (`FollowerProducer.drop_unsent`) would be
answered as done, and undone by the next owner, which restored the partition without it.

So the event loop ticks, and a change (`MessageService`'s deletes and visibility changes)
asks `settled` before it acts and again before it answers; a receive asks before it leases
(a lease taken on a lost partition would reach the changelog after the next owner's
records), and again before it answers leases it took before waiting for something else
(`MessageService._still_served`). If the loop stood still for `stall_s` (noticed now, or less than `settle_s` ago),
`settled` waits until `settle_s` after the stall was noticed, enough for the loss to
arrive; the change then finds its partition served elsewhere, or moved while it was
confirmed (`MessageService._fail_if_moved`), and is made at the next owner.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from topology.stall import SETTLE_S, STALL_S

log = logging.getLogger("kqs.ownership")

# How often the event loop notes that it runs.
TICK_S = 0.25


class PauseWatch:
    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        stall_s: float = STALL_S,
        settle_s: float = SETTLE_S,
    ) -> None:
        self._monotonic = monotonic
        self._stall_s = stall_s
        self._settle_s = settle_s
        self._last_tick = monotonic()
        self._settle_until = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._last_tick = self._monotonic()
        self._timer = loop.call_later(TICK_S, self._tick, loop)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.check()
        self._timer = loop.call_later(TICK_S, self._tick, loop)

    def check(self) -> None:
        """Note a stall if the loop has not run for `stall_s`; whoever runs first after one
        (the tick, or a request that was waiting in a socket) notices it."""
        now = self._monotonic()
        if now - self._last_tick >= self._stall_s:
            self._settle_until = now + self._settle_s
            log.warning(
                "the event loop stood still: changes wait for the group's word",
                extra={"stood_still_s": round(now - self._last_tick, 3), "wait_s": self._settle_s},
            )
        self._last_tick = now

    async def settled(self) -> None:
        """Return at once, unless the loop stood still (noticed now or less than `settle_s`
        ago) and the loss of partitions it may have caused could still be on its way."""
        self.check()
        wait_s = self._settle_until - self._monotonic()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
