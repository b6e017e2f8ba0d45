"""Publishes every queue's Approximate* numbers to `__kqs_events` periodically.

Every `KQS_GAUGE_INTERVAL_S` (10 s), one `gauges` event per existing queue whose numbers
changed since its last event, from the lease stores' exact counters (with several gateways,
the one serving the queue's partition 0 reports its totals), so the analytics jobs
can chart ApproximateNumberOfMessagesVisible, -NotVisible, -Delayed and
ApproximateAgeOfOldestMessage as CloudWatch does. A queue whose numbers stay the same (an
idle, empty queue) gets one event every `UNCHANGED_EVERY_S` (60 s) instead: still a sample
in every one-minute window, but an idle gateway no longer hands the Spark jobs new events
every 10 s, which made them run a batch per query per trigger with nothing to count.
(A queue holding messages changes anyway: the age of its oldest message grows.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from gateway.observability.events import EventSink
from lease_store.types import Counts
from topology.catalog import QueueLookup, QueueRecord

log = logging.getLogger("kqs.gauges")

UNCHANGED_EVERY_S = 60.0

_Snapshot = tuple[Counts, int]


class GaugeSource(Protocol):
    """The message service's side of the gauges (`MessageService.queue_gauges`)."""

    async def queue_gauges(
        self, records: Sequence[QueueRecord]
    ) -> tuple[int, dict[str, tuple[Counts, int]]]: ...


class GaugeThrottle:
    """Which queues' gauges to publish now: changed ones, and unchanged ones once a while."""

    def __init__(
        self,
        unchanged_every_s: float = UNCHANGED_EVERY_S,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._unchanged_every_s = unchanged_every_s
        self._clock_s = clock_s
        self._last: dict[str, tuple[_Snapshot, float]] = {}

    def due(self, key: str, snapshot: _Snapshot) -> bool:
        now = self._clock_s()
        last = self._last.get(key)
        if last is not None and last[0] == snapshot and now - last[1] < self._unchanged_every_s:
            return False
        self._last[key] = (snapshot, now)
        return True

    def forget_except(self, keys: set[str]) -> None:
        for key in [k for k in self._last if k not in keys]:
            del self._last[key]


async def publish_gauges_once(
    registry: QueueLookup,
    messages: GaugeSource,
    sink: EventSink,
    throttle: GaugeThrottle | None = None,
) -> int:
    """One `gauges` event per queue this gateway reports (without `throttle`: every one;
    with it: those due); returns how many were published.

    With several gateways a queue's numbers are its totals over all its partitions, from
    the one gateway that reports it (`MessageService.queue_gauges`): the analytics jobs
    average the samples of a window, so one partial sample per gateway would be wrong.
    """
    published = 0
    active = registry.all_active()
    read_ms, gauges = await messages.queue_gauges(active)
    for record in active:
        if (gauge := gauges.get(record.key)) is None:
            continue  # reported by another gateway, or not complete this round
        counts, age_s = gauge
        if throttle is not None and not throttle.due(record.key, (counts, age_s)):
            continue
        sink.gauges(record, counts, age_s, read_ms)
        published += 1
    if throttle is not None:
        throttle.forget_except({record.key for record in active})
    return published


async def publish_gauges(
    registry: QueueLookup, messages: GaugeSource, sink: EventSink, interval_s: float
) -> None:
    throttle = GaugeThrottle()
    while True:
        await asyncio.sleep(interval_s)
        try:
            await publish_gauges_once(registry, messages, sink, throttle)
        except Exception:
            # A failing pass (e.g. a queue deleted meanwhile) must not end the loop.
            log.exception("queue gauges not published")
