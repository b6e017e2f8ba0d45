"""Operation outcomes for analytics: the `EventSink` the message plane reports to.

`MessageService` and the send action call one method per outcome once the client's answer
is decided; the sink must return at once and never raise. `EventSink` itself does nothing
(for code under test that does not care); the gateway always wires `KafkaEventSink`, which
builds `topology/event_format.py` records and hands them to the bounded, fire-and-forget
`topology/events.py` publisher. Which outcome produces which event, and why, is in
`docs/ARCHITECTURE.md` ("Events and metrics").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, Protocol

from lease_store.clock import Clock
from lease_store.records import StoredMessage
from lease_store.types import Counts, Delivery
from topology import event_format
from topology.catalog import QueueRecord
from topology.event_format import Event

log = logging.getLogger("kqs.events")
P = ParamSpec("P")


class EventSink:
    """Receives what happened to messages. The base class drops everything."""

    def sent(self, record: QueueRecord, messages: Sequence[tuple[StoredMessage, int]]) -> None:
        """A send request stored these messages (acknowledged by Kafka), each with SQS's
        SentMessageSize: one event for them all."""

    def received(self, record: QueueRecord, deliveries: Sequence[Delivery]) -> None:
        """A ReceiveMessage returned these messages (one event for them all)."""

    def empty_receive(self, record: QueueRecord) -> None:
        """A ReceiveMessage returned nothing, after its long poll."""

    def flush(self) -> None:
        """Publish what is held back (empty receives are counted before they are sent)."""

    def deleted(self, record: QueueRecord, message_ids: Sequence[str]) -> None:
        """A delete request removed these messages (not the ones that were already gone):
        one event for them all."""

    def moved_to_dlq(self, source: QueueRecord, dlq: QueueRecord, delivery: Delivery) -> None:
        """A receive moved this message past maxReceiveCount into `dlq`."""

    def expired(self, record: QueueRecord, message_ids: Sequence[str]) -> None:
        """These messages were dropped past the queue's MessageRetentionPeriod."""

    def purged(self, record: QueueRecord, messages: int) -> None:
        """A PurgeQueue dropped this many messages."""

    def gauges(
        self, record: QueueRecord, counts: Counts, oldest_age_s: int, ts_ms: int | None = None
    ) -> None:
        """The queue's Approximate* numbers (called periodically), as read at `ts_ms` (now
        when None)."""


class Publisher(Protocol):
    def publish(self, key: bytes, value: bytes) -> bool: ...


def _never_raises(
    method: Callable[Concatenate[KafkaEventSink, P], None],
) -> Callable[Concatenate[KafkaEventSink, P], None]:
    """An event must never fail the request that caused it: log and count instead."""

    def guarded(sink: KafkaEventSink, /, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            method(sink, *args, **kwargs)
        except Exception:
            sink.errors += 1
            log.exception("event not published", extra={"event": method.__name__})

    return guarded


# Empty receives of one queue within this long (and within one minute) share one event.
EMPTY_RECEIVE_WINDOW_MS = 1000


class KafkaEventSink(EventSink):
    """Publishes each outcome to `__kqs_events`, timestamped by the gateway's clock.

    Empty receives are the exception: a short-polling consumer of an empty queue makes
    hundreds a second, each otherwise a record of its own. They are counted per queue and
    published as one event (`count`, the time of the first) per window of up to
    `EMPTY_RECEIVE_WINDOW_MS` that never spans a minute boundary, so the per-minute
    NumberOfEmptyReceives is exact. `flush()` publishes what is counted; the gateway calls
    it every second and at shutdown.
    """

    def __init__(self, publisher: Publisher, clock: Clock) -> None:
        self._publisher = publisher
        self._clock = clock
        self.errors = 0  # events that could not even be built (a bug): logged, never raised
        # queue topic -> (record, time of the first empty receive counted, how many)
        self._empty_receives: dict[str, tuple[QueueRecord, int, int]] = {}
        # catalog key -> (record key, JSON members naming the queue), see `_queue`
        self._queues: dict[str, tuple[bytes, str]] = {}

    @_never_raises
    def sent(self, record: QueueRecord, messages: Sequence[tuple[StoredMessage, int]]) -> None:
        if not messages:
            return
        key, queue = self._queue(record)
        stored = [(message.message_id, size) for message, size in messages]
        self._publisher.publish(key, event_format.encode_sent(self._clock.now_ms(), queue, stored))

    @_never_raises
    def received(self, record: QueueRecord, deliveries: Sequence[Delivery]) -> None:
        if not deliveries:
            return
        key, queue = self._queue(record)
        messages = [(d.message.message_id, d.fact.receive_count) for d in deliveries]
        self._publisher.publish(
            key, event_format.encode_received(self._clock.now_ms(), queue, messages)
        )

    @_never_raises
    def empty_receive(self, record: QueueRecord) -> None:
        ts = self._clock.now_ms()
        counted = self._empty_receives.get(record.topic)
        if counted is not None:
            _, first_ms, count = counted
            if ts - first_ms < EMPTY_RECEIVE_WINDOW_MS and ts // 60_000 == first_ms // 60_000:
                self._empty_receives[record.topic] = (record, first_ms, count + 1)
                return
            self._publish_empty_receives(*counted)
        self._empty_receives[record.topic] = (record, ts, 1)

    @property
    def held_back(self) -> int:
        """Events counted but not yet handed to the publisher (see `flush`)."""
        return len(self._empty_receives)

    @_never_raises
    def flush(self) -> None:
        """Publish the empty receives counted so far."""
        counted, self._empty_receives = self._empty_receives, {}
        for record, first_ms, count in counted.values():
            self._publish_empty_receives(record, first_ms, count)

    def _publish_empty_receives(self, record: QueueRecord, first_ms: int, count: int) -> None:
        self._publish(
            record,
            event_format.empty_receive(
                first_ms, record.account_id, record.name, region=record.region, count=count
            ),
        )

    @_never_raises
    def deleted(self, record: QueueRecord, message_ids: Sequence[str]) -> None:
        if not message_ids:
            return
        key, queue = self._queue(record)
        self._publisher.publish(
            key, event_format.encode_deleted(self._clock.now_ms(), queue, message_ids)
        )

    @_never_raises
    def moved_to_dlq(self, source: QueueRecord, dlq: QueueRecord, delivery: Delivery) -> None:
        ts = self._clock.now_ms()
        message = delivery.message
        self._publish(
            dlq,
            event_format.moved_to_dlq(
                ts,
                dlq.account_id,
                dlq.name,
                source.name,
                message.message_id,
                delivery.fact.receive_count,
                message.sent_ms,
                message.attributes,
                region=dlq.region,
            ),
        )

    @_never_raises
    def expired(self, record: QueueRecord, message_ids: Sequence[str]) -> None:
        ts = self._clock.now_ms()
        for message_id in message_ids:
            self._publish(
                record,
                event_format.expired(
                    ts, record.account_id, record.name, message_id, region=record.region
                ),
            )

    @_never_raises
    def purged(self, record: QueueRecord, messages: int) -> None:
        ts = self._clock.now_ms()
        self._publish(
            record,
            event_format.purged(ts, record.account_id, record.name, messages, region=record.region),
        )

    @_never_raises
    def gauges(
        self, record: QueueRecord, counts: Counts, oldest_age_s: int, ts_ms: int | None = None
    ) -> None:
        ts = self._clock.now_ms() if ts_ms is None else ts_ms
        self._publish(
            record,
            event_format.gauges(
                ts,
                record.account_id,
                record.name,
                counts.visible,
                counts.in_flight,
                counts.delayed,
                oldest_age_s,
                region=record.region,
            ),
        )

    def _publish(self, record: QueueRecord, event: Event) -> None:
        self._publisher.publish(self._queue(record)[0], event_format.encode(event))

    def _queue(self, record: QueueRecord) -> tuple[bytes, str]:
        """The queue's record key and JSON members, encoded once per queue."""
        known = self._queues.get(record.key)
        if known is None:
            members = event_format.queue_members(record.account_id, record.name, record.region)
            known = self._queues[record.key] = (record.key.encode(), members)
        return known
