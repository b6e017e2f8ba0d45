"""Drops messages past their queue's MessageRetentionPeriod, periodically, in every queue.

Receives skip and drop expired messages, and reading the counters expires first, so no
client ever sees an expired message; this sweep frees their storage when nobody asks, and
keeps the backlog start that `backlog.py` commits to Kafka from lagging behind them. Each
pass reads only the expired entries of the lease store's expiry index.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.sqs.fifo import FifoService
from gateway.sqs.messages.service import MessageService
from gateway.sqs.queues import QueueRegistry, is_fifo

log = logging.getLogger("kqs.expiry")

EXPIRY_INTERVAL_S = 10.0


async def expire_messages(
    registry: QueueRegistry,
    messages: MessageService,
    fifo: FifoService,
    interval_s: float = EXPIRY_INTERVAL_S,
) -> None:
    while True:
        await asyncio.sleep(interval_s)
        for record in registry.all_active():
            dropped = messages.expire(record)
            if is_fifo(record):
                fifo.prune(record)  # deduplication entries past their 5 minutes
            if dropped:
                log.info(
                    "expired messages dropped", extra={"queue": record.key, "messages": dropped}
                )
