"""With several gateways, a delete or visibility change is durable only once its changelog
record is in Kafka: shared flushes of the follower producer, one at a time.

One gateway recovers its own lease store after a crash (the synced WAL is the durable
record; the `__kqs_leases` record follows). With several, a partition whose gateway was
SIGKILLed is restored by another from `__kqs_leases` alone, so a change that had not reached
it would be undone there: an acknowledged delete comes back (the crash suite's scale-out run
saw 3 in 1,918 messages). In group mode `MessageService` therefore also awaits `flushed()`
before answering (the DESIGN allows either durable record: "a synced WAL or an acknowledged
changelog record"). Callers of the same moment share one flush, like `GroupSync`'s fsync: a
flush covers every record handed to librdkafka before it started, so a caller whose records
were handed over while a flush ran waits for the next one.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.errors import ServiceUnavailable
from topology.producer import FollowerProducer

log = logging.getLogger("kqs.changelog_flush")

# Bounded like a send (the producer's delivery timeout): Kafka gone means a retryable error.
FLUSH_TIMEOUT_S = 15.0


class SharedFlush:
    def __init__(self, follower: FollowerProducer) -> None:
        self._follower = follower
        self._running: asyncio.Future[int] | None = None
        self._next: asyncio.Future[int] | None = None  # the flush the latest callers wait for

    async def flushed(self) -> None:
        """Return once every changelog record handed over so far is acknowledged by Kafka;
        raises `ServiceUnavailable` if Kafka did not take them in time."""
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        target = self._next
        if self._running is None:
            self._start()
        remaining = await asyncio.shield(target)
        if remaining:
            raise ServiceUnavailable(
                "The change was made but its record did not reach Kafka in time. Retry later."
            )

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        waiting, self._next = self._next, None
        assert waiting is not None
        self._running = waiting
        flush = loop.run_in_executor(None, self._follower.flush, FLUSH_TIMEOUT_S)
        flush.add_done_callback(lambda done: self._finished(waiting, done))

    def _finished(self, waiting: asyncio.Future[int], done: asyncio.Future[int]) -> None:
        self._running = None
        error = done.exception()
        if error is not None:
            log.warning("changelog flush failed", extra={"error": str(error)})
            waiting.set_result(1)
        else:
            remaining = done.result()
            if remaining:
                log.warning("changelog records not delivered in time", extra={"records": remaining})
            waiting.set_result(remaining)
        if self._next is not None:
            self._start()  # callers that came while this flush ran
