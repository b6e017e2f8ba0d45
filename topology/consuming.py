"""Consumer idioms shared by ingest, the catalog reader and the lease rebuild."""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from lease_store.records import StoredMessage
from topology.producer import coordinates
from topology.record_format import from_record

log = logging.getLogger("kqs.consuming")


def poll_batch(consumer: Consumer, timeout_s: float, max_messages: int = 10_000) -> list[Message]:
    """Wait up to `timeout_s` for one record, then take whatever else is already fetched.

    `Consumer.consume(n, timeout)` waits its whole timeout whenever fewer than `n` records
    are ready, which put that timeout into every send's latency and every partition read.
    """
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(num_messages=max_messages - 1, timeout=0)]


def watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> tuple[int, int]:
    """Log start and end offsets of a partition, waiting out a new topic's leader election.

    A just-created topic answers NOT_LEADER until its election ends, which librdkafka does
    not flag as retriable: every error is retried until the deadline.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=5)
            return int(low), int(high)
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise
            log.info("waiting for a topic leader", extra={"topic": tp.topic, "error": str(exc)})
            time.sleep(0.2)


def as_bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def decode_queue_record(msg: Message) -> tuple[int, StoredMessage]:
    """The offset and message of a record consumed from a queue topic."""
    topic, partition, offset = coordinates(msg)
    headers = msg.headers()
    message = from_record(
        topic,
        partition,
        offset,
        as_bytes(msg.key()),
        as_bytes(msg.value()),
        msg.timestamp()[1],
        [(k, as_bytes(v)) for k, v in headers] if isinstance(headers, list) else [],
    )
    return offset, message
