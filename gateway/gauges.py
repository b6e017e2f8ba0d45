"""Publishes every queue's Approximate* numbers to `__kqs_events` periodically.

One `gauges` event per existing queue every `KQS_GAUGE_INTERVAL_S`, from the lease store's
exact counters, so the analytics jobs can chart ApproximateNumberOfMessagesVisible,
-NotVisible, -Delayed and ApproximateAgeOfOldestMessage as CloudWatch does.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.events import EventSink
from gateway.messages import MessageService
from gateway.queues import QueueRegistry

log = logging.getLogger("kqs.gauges")


def publish_gauges_once(registry: QueueRegistry, messages: MessageService, sink: EventSink) -> int:
    """One `gauges` event per queue; returns how many were published."""
    published = 0
    for record in registry.all_active():
        sink.gauges(record, messages.counts(record), messages.oldest_message_age_s(record))
        published += 1
    return published


async def publish_gauges(
    registry: QueueRegistry, messages: MessageService, sink: EventSink, interval_s: float
) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            publish_gauges_once(registry, messages, sink)
        except Exception:
            # A failing pass (e.g. a queue deleted meanwhile) must not end the loop.
            log.exception("queue gauges not published")
