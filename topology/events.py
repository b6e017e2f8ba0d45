"""The `__kqs_events` publisher: fire-and-forget, bounded, never in a request's way.

Analytics events must not cost a client anything, so this producer is separate from the
durable one (`producer.py`) and tuned the other way: `acks=1`, no idempotence, a few ms of
linger, and a bounded local queue. `publish()` appends a record to a queue in memory and
returns at once; it never waits and never raises. The publisher's own thread hands what was
queued to librdkafka every `HAND_OVER_S` and serves the delivery reports, so the request
path pays neither librdkafka's produce call nor the wake-ups of its threads (on a busy core
a wake-up can cost the event loop its time slice). A record that does not fit in the
bounded queue (what waits for the hand-over and what librdkafka holds), or that the broker
does not take within `message.timeout.ms`, is dropped and counted (by reason), with a
warning at most every `DROP_LOG_INTERVAL_S`.

Events are the most frequent records the gateway writes (one per message sent, one per
receive or delete request, single calls: three per message), so their cost per record matters
more than their latency: librdkafka reports only failed deliveries (a Python callback per
delivered event took the GIL from the request path as often as requests arrived), and a long
linger sends them in few, large requests. Measured on workload (a) of `bench/sidebyside`: see bench/results/archive/profile-journal.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from topology.admin import TopicAdmin
from topology.client_log import RepeatLimit
from topology.client_properties import connection
from topology.names import EVENTS_TOPIC
from topology.producer_stats import StatisticsHolder

log = logging.getLogger("kqs.events")
_LIBRDKAFKA_LOG = logging.getLogger("kqs.events.librdkafka")
_LIBRDKAFKA_LOG.addFilter(RepeatLimit())

RETENTION_MS = 7 * 24 * 60 * 60 * 1000
TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS)}
DEFAULT_BUFFER_MESSAGES = 100_000
DROP_LOG_INTERVAL_S = 10.0

BUFFER_FULL = "buffer_full"
DELIVERY_FAILED = "delivery_failed"

PUBLISH_SETTINGS: dict[str, Any] = {
    "acks": 1,
    "enable.idempotence": False,
    # Analytics windows are 10 s and longer: a tenth of a second of batching costs them
    # nothing and turns hundreds of produce requests a second into ten.
    "linger.ms": 100,
    "delivery.report.only.error": True,
    "compression.type": "lz4",
    "queue.buffering.max.kbytes": 64 * 1024,
    "message.timeout.ms": 30_000,
    "socket.connection.setup.timeout.ms": 5_000,
}


async def ensure_events_topic(admin: TopicAdmin, partitions: int) -> None:
    """Create `__kqs_events` (7 days, not compacted); an existing topic is kept as is."""
    await admin.create_topic(EVENTS_TOPIC, partitions, TOPIC_CONFIG)


class EventPublisher:
    HAND_OVER_S = 0.05

    def __init__(
        self,
        bootstrap: str,
        buffer_messages: int = DEFAULT_BUFFER_MESSAGES,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.statistics = StatisticsHolder()
        config = {
            **connection(bootstrap),
            **PUBLISH_SETTINGS,
            "queue.buffering.max.messages": buffer_messages,
            "error_cb": self._on_error,
            "logger": _LIBRDKAFKA_LOG,  # librdkafka's own log lines, served by poll()
            **self.statistics.config(),
            **(extra or {}),
        }
        self._producer = Producer(config)
        self._buffer_messages = buffer_messages
        # Published, not yet handed to librdkafka (appended by the loop, popped by the poll
        # thread: deque appends and pops are atomic).
        self._queued: deque[tuple[bytes, bytes]] = deque()
        # Each counter has one writer: `_buffer_full` the event loop; the delivery failures,
        # `_accepted` (handed to librdkafka) and `_refused` (librdkafka's queue was full
        # at the hand-over) the poll thread.
        self._accepted = 0
        self._refused = 0
        self._published_seen = 0
        self._delivery_failed = 0
        self._buffer_full = 0
        self._logged_drops = 0
        self._next_drop_log = 0.0
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._poll_forever, name="kqs-events", daemon=True)
        self._poller.start()

    @property
    def dropped(self) -> dict[str, int]:
        return {
            BUFFER_FULL: self._buffer_full + self._refused,
            DELIVERY_FAILED: self._delivery_failed,
        }

    @property
    def published(self) -> int:
        """Events the broker acknowledged.

        Only failures are reported one by one, so this is what was accepted less what failed
        and what librdkafka still holds; never lower than an earlier answer, as readers of a
        counter expect, although the three numbers are read at slightly different moments.
        """
        now = self._accepted - self._delivery_failed - len(self._producer)
        self._published_seen = max(self._published_seen, now)
        return self._published_seen

    @property
    def buffered(self) -> int:
        """Records handed to librdkafka and not yet acknowledged or dropped.

        The queue not yet handed over plus librdkafka's count, which includes its own
        pending requests and callbacks: 0 means every event published so far has been
        delivered or dropped.
        """
        return len(self._queued) + len(self._producer)

    def publish(self, key: bytes, value: bytes) -> bool:
        """Queue one record for `__kqs_events`; False if it was dropped (buffer full)."""
        if self._stopping.is_set():
            return False
        if len(self._queued) + len(self._producer) >= self._buffer_messages:
            self._buffer_full += 1
            self._log_drops()
            return False
        self._queued.append((key, value))
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is buffered for up to `timeout_s`; what remains is dropped."""
        self._stopping.set()
        self._poller.join(timeout=5)
        self._hand_over()
        remaining: int = self._producer.flush(timeout_s)
        if remaining:
            log.warning("events dropped at shutdown", extra={"events": remaining})

    def _poll_forever(self) -> None:
        while not self._stopping.is_set():
            self._producer.poll(self.HAND_OVER_S)
            self._hand_over()

    def _hand_over(self) -> None:
        queued = self._queued
        while queued:
            key, value = queued.popleft()
            try:
                self._producer.produce(EVENTS_TOPIC, value, key, on_delivery=self._on_delivery)
            except (BufferError, KafkaException):
                self._refused += 1
                self._log_drops()
                continue
            self._accepted += 1

    def _on_delivery(self, error: KafkaError | None, _msg: Message) -> None:
        if error is not None:  # delivered ones are not reported (delivery.report.only.error)
            self._delivery_failed += 1
            self._log_drops(str(error))

    def _on_error(self, error: KafkaError) -> None:
        # Connection trouble is reported here too; its consequence, dropped events, is
        # counted and logged by the delivery reports.
        log.debug("events producer error", extra={"error": str(error)})

    def _log_drops(self, reason: str = BUFFER_FULL) -> None:
        now = time.monotonic()
        if now < self._next_drop_log:
            return
        self._next_drop_log = now + DROP_LOG_INTERVAL_S
        total = self._buffer_full + self._refused + self._delivery_failed
        log.warning(
            "analytics events dropped",
            extra={
                "dropped": total,
                "since_last_warning": total - self._logged_drops,
                "reason": reason,
            },
        )
        self._logged_drops = total
