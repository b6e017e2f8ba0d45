"""A thin asyncio wrapper over confluent_kafka's Producer.

Durability settings are fixed here, not left to configuration: `acks=all` with idempotence,
so a record the broker acknowledged is on every in-sync replica and retries never duplicate
it. `send()` resolves only from the delivery report, i.e. after that acknowledgement.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from topology.producer_stats import StatisticsHolder
from topology.record_format import MAX_RECORD_BYTES

log = logging.getLogger("kqs.producer")

DURABLE_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 2,
    # Bounded, so a client whose broker is gone gets an error instead of a hang.
    "message.timeout.ms": 15_000,
    "socket.connection.setup.timeout.ms": 5_000,
    # Not durability, but not configurable either: a 1 MiB message must fit in a record.
    "message.max.bytes": MAX_RECORD_BYTES,
}


class ProduceFailed(Exception):
    """The broker did not acknowledge a record within the delivery timeout."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.retriable = bool(error.retriable()) or error.code() == KafkaError._MSG_TIMED_OUT


@dataclass(frozen=True, slots=True)
class Delivered:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class AsyncProducer:
    def __init__(
        self, bootstrap: str, extra: dict[str, Any] | None = None, statistics: bool = False
    ) -> None:
        # With `statistics`, librdkafka's numbers arrive in `self.statistics` every 5 s.
        self.statistics = StatisticsHolder()
        stats_config = self.statistics.config() if statistics else {}
        config = {
            "bootstrap.servers": bootstrap,
            **(extra or {}),
            **stats_config,
            **DURABLE_SETTINGS,
        }
        self._producer = Producer(config)
        self._stopping = threading.Event()
        # Delivery reports fire from poll(); a dedicated thread keeps them flowing without
        # blocking the event loop.
        self._poller = threading.Thread(target=self._poll_forever, name="kqs-producer", daemon=True)
        self._poller.start()

    def _poll_forever(self) -> None:
        while not self._stopping.is_set():
            self._producer.poll(0.05)

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int = 0,
        partition: int | None = None,
    ) -> Delivered:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Delivered] = loop.create_future()

        def on_delivery(error: KafkaError | None, msg: Message) -> None:
            loop.call_soon_threadsafe(_settle, future, error, msg)

        kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": on_delivery}
        if headers:
            kwargs["headers"] = headers
        if timestamp_ms:
            kwargs["timestamp"] = timestamp_ms
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:
                # The local queue is full: wait for deliveries to drain it.
                await asyncio.sleep(0.01)
        return await future

    def send_soon(
        self, topic: str, value: bytes | None, key: bytes | None = None
    ) -> asyncio.Future[Delivered]:
        """Produce now, from the event loop, and return the future of the delivery report.

        Unlike `send`, the record is handed to librdkafka before this returns, so records
        produced by successive calls keep their order. A full local queue is drained in place
        (blocking the loop briefly) rather than awaited.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Delivered] = loop.create_future()

        def on_delivery(error: KafkaError | None, msg: Message) -> None:
            loop.call_soon_threadsafe(_settle, future, error, msg)

        while True:
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                return future
            except BufferError:
                self._producer.poll(0.01)

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for outstanding deliveries; returns how many are still undelivered."""
        remaining: int = self._producer.flush(timeout_s)
        return remaining

    def close(self) -> None:
        remaining = self.flush()
        if remaining:
            log.warning("producer closed with undelivered records", extra={"remaining": remaining})
        self._stopping.set()
        self._poller.join(timeout=5)


def _settle(future: asyncio.Future[Delivered], error: KafkaError | None, msg: Message) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(ProduceFailed(error))
        return
    topic, partition, offset = coordinates(msg)
    _, timestamp_ms = msg.timestamp()
    future.set_result(Delivered(topic, partition, offset, timestamp_ms))


def coordinates(msg: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a delivered or consumed record (never None there)."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset
