"""Follows one partition of a topic from an offset, on a thread, for the event loop.

For the small compacted topics every gateway reads whole at start and then keeps following
(the queue catalog): records are handed to the event loop in log order, in the batches one
poll returned, through `call_soon_threadsafe`, so the state they change keeps one writer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.consuming import as_bytes, poll_batch, watermarks
from topology.producer import coordinates

log = logging.getLogger("kqs.topic_tail")

# (offset, key, value); value None is a tombstone.
TailRecord = tuple[int, bytes, bytes | None]
OnRecords = Callable[[list[TailRecord]], None]

# How long a fetch with nothing new waits at the broker: the delay before another gateway's
# change is seen (these topics are one partition each, so a short wait costs little).
DEFAULT_FETCH_WAIT_MS = 100


def read_to_end(bootstrap: str, topic: str, on_records: OnRecords, timeout_s: float = 30.0) -> int:
    """Hand every record of partition 0 of `topic`, up to its end now, to `on_records` (in
    log order, one record a call), blocking; returns that end: where a `TopicTail` resumes."""
    consumer = Consumer(
        {
            **connection(bootstrap),
            "group.id": "kqs-topic-reader",  # required by librdkafka; nothing is committed
            "enable.auto.commit": False,
            "logger": LIBRDKAFKA,
        }
    )
    try:
        _, high = watermarks(consumer, TopicPartition(topic, 0), timeout_s)
        if high <= 0:
            return 0
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        position = -1
        while position < high - 1:
            msg = consumer.poll(timeout_s)
            if msg is None:
                raise TimeoutError(f"{topic} stalled at offset {position}")
            if msg.error():
                raise RuntimeError(f"reading {topic}: {msg.error()}")
            _, _, position = coordinates(msg)
            on_records([(position, as_bytes(msg.key()) or b"", as_bytes(msg.value()))])
        return high
    finally:
        consumer.close()


class TopicTail:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        start_offset: int,
        on_records: OnRecords,
        fetch_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
    ) -> None:
        """Follow partition 0 of `topic` from `start_offset`; `on_records` runs on the loop
        given to `start`."""
        self._bootstrap = bootstrap
        self._topic = topic
        self._start_offset = start_offset
        self._on_records = on_records
        self._fetch_wait_ms = fetch_wait_ms
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run, name=f"kqs-tail-{self._topic}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        consumer = Consumer(
            {
                **connection(self._bootstrap),
                # Required by librdkafka; nothing is committed (manual assignment).
                "group.id": "kqs-topic-tail",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": self._fetch_wait_ms,
                "logger": LIBRDKAFKA,
            }
        )
        try:
            consumer.assign([TopicPartition(self._topic, 0, self._start_offset)])
            while not self._stopping.is_set():
                try:
                    messages = poll_batch(consumer, 0.1, max_messages=1000)
                except Exception:  # the thread must survive transient client errors
                    log.exception("tail consume failed", extra={"topic": self._topic})
                    continue
                batch: list[TailRecord] = []
                for msg in messages:
                    error = msg.error()
                    if error is not None:
                        log.warning(
                            "tail fetch error", extra={"topic": self._topic, "error": str(error)}
                        )
                        continue
                    _, _, offset = coordinates(msg)
                    batch.append((offset, as_bytes(msg.key()) or b"", as_bytes(msg.value())))
                if batch:
                    self._hand_over(batch)
        finally:
            consumer.close()

    def _hand_over(self, batch: list[TailRecord]) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._apply, batch)
        except RuntimeError:
            self._stopping.set()  # the loop is closed: nobody follows any more

    def _apply(self, batch: list[TailRecord]) -> None:
        try:
            self._on_records(batch)
        except Exception:
            log.exception("tail records not applied", extra={"topic": self._topic})
