"""Tails the queue topics and hands their records to the lease store.

One consumer thread per gateway, with manual partition assignment: the gateway decides which
queue partitions it owns and where each resumes (the lease store's applied offset + 1). Records
are decoded on the thread and handed to the event loop in per-partition batches, so the lease
store keeps a single writer.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from lease_store.records import StoredMessage
from topology.client_log import LIBRDKAFKA
from topology.consuming import decode_queue_record, poll_batch
from topology.names import INGEST_GROUP
from topology.producer import coordinates

log = logging.getLogger("kqs.ingest")

Batch = list[tuple[int, StoredMessage]]
BatchHandler = Callable[[str, int, Batch], None]
# Batches handed to the event loop and not yet applied. Without a bound, a large backlog
# arriving at once (a Kafka producer filling a queue, a restart far behind) queues thousands
# of callbacks ahead of the HTTP requests, which then wait for all of them.
MAX_BATCHES_IN_FLIGHT = 2
# Longest wait of a fetch with less than 64 KiB to return: how late another producer's record
# (a Kafka-native producer's) can become receivable. Every fetch names every assigned
# partition (librdkafka has no incremental fetch sessions), so its cost grows with the
# queues: measured idle with 5,000 one-partition queues, librdkafka's fetch thread took 49 %
# of a core at 100 ms and 11 % at 1,000 ms (the broker 19 % and 8 %); with 10,000 queues
# the gateway used 82 % of a core at 100 ms, doing nothing.
DEFAULT_FETCH_WAIT_MS = 500


@dataclass(frozen=True, slots=True)
class _Assign:
    topic: str
    next_offsets: dict[int, int]  # partition -> first offset to read


@dataclass(frozen=True, slots=True)
class _Commit:
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, offset)


@dataclass(frozen=True, slots=True)
class _Unassign:
    topic: str
    partitions: tuple[int, ...]


class IngestConsumer:
    def __init__(
        self,
        bootstrap: str,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int] | None = None,
        fetch_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
    ):
        """`applied`: (topic, partition) -> offset applied already, kept by the event loop; the
        records at or below it (the gateway's own, applied from their delivery reports) are
        dropped here without being decoded or handed over. `fetch_wait_ms`: see
        `DEFAULT_FETCH_WAIT_MS`."""
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": INGEST_GROUP,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                # The gateway applies its own records from their delivery reports, so ingest
                # only has to be prompt for other producers' records: the broker answers a
                # fetch when 64 KiB are there or after `fetch_wait_ms`, instead of once per
                # produce request (a fetch per append cost the broker as much as the append).
                "fetch.wait.max.ms": fetch_wait_ms,
                "fetch.min.bytes": 64 * 1024,
                "logger": LIBRDKAFKA,
            }
        )
        self._applied: Mapping[tuple[str, int], int] = applied if applied is not None else {}
        self._loop = loop
        self._on_batch = on_batch
        self._commands: queue.SimpleQueue[_Assign | _Unassign | _Commit] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._in_flight = threading.BoundedSemaphore(MAX_BATCHES_IN_FLIGHT)
        self._thread = threading.Thread(target=self._run, name="kqs-ingest", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
        self._consumer.close()

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None:
        self._commands.put(_Assign(topic, next_offsets))

    def unassign(self, topic: str, partitions: int) -> None:
        self._commands.put(_Unassign(topic, tuple(range(partitions))))

    def commit(self, offsets: list[tuple[str, int, int]]) -> None:
        """Commit (topic, partition, offset) triples as the ingest group's offsets.

        Informational for Kafka tools (lag = backlog): ingestion itself resumes from the
        lease store's applied offset, which is written atomically with the leases.
        """
        if offsets:
            self._commands.put(_Commit(tuple(offsets)))

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._apply_commands()
            try:
                messages = poll_batch(self._consumer, 0.05, max_messages=1000)
            except Exception:  # the thread must survive transient client errors
                log.exception("ingest consume failed")
                continue
            batches: dict[tuple[str, int], Batch] = {}
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("ingest fetch error", extra={"error": str(error)})
                    continue
                topic, partition, offset = coordinates(msg)
                if offset <= self._applied.get((topic, partition), -1):
                    continue
                offset, stored = decode_queue_record(msg)
                batches.setdefault((topic, partition), []).append((offset, stored))
            for (topic, partition), batch in batches.items():
                while not self._in_flight.acquire(timeout=0.1):
                    if self._stopping.is_set():
                        return
                self._loop.call_soon_threadsafe(self._apply, topic, partition, batch)

    def _apply(self, topic: str, partition: int, batch: Batch) -> None:
        """Runs on the event loop: one batch into the lease store, then room for the next."""
        try:
            self._on_batch(topic, partition, batch)
        finally:
            self._in_flight.release()

    def _apply_commands(self) -> None:
        commands: list[_Assign | _Unassign | _Commit] = []
        while True:
            try:
                commands.append(self._commands.get_nowait())
            except queue.Empty:
                break
        # Assignments are applied together: a gateway starting with thousands of queues
        # makes one assign call and one metadata request, not one of each per queue.
        assigned = [
            TopicPartition(command.topic, p, offset if offset >= 0 else OFFSET_BEGINNING)
            for command in commands
            if isinstance(command, _Assign)
            for p, offset in command.next_offsets.items()
        ]
        for command in commands:
            if isinstance(command, _Unassign):
                # An unassign of a topic assigned in this same round must come after it.
                if assigned:
                    self._consumer.incremental_assign(assigned)
                    assigned = []
                self._consumer.incremental_unassign(
                    [TopicPartition(command.topic, p) for p in command.partitions]
                )
            elif isinstance(command, _Commit):
                try:
                    self._consumer.commit(
                        offsets=[TopicPartition(t, p, o) for t, p, o in command.offsets],
                        asynchronous=True,
                    )
                except KafkaException as exc:
                    log.warning("offset commit failed", extra={"error": str(exc)})
        if assigned:
            self._consumer.incremental_assign(assigned)
        if any(isinstance(command, _Assign) for command in commands):
            self._learn_leaders()

    def _learn_leaders(self) -> None:
        """Ask for metadata now, so fetching from newly assigned topics starts at once.

        librdkafka looks up the leaders of a newly assigned, not yet known topic only on its
        1 s topic scan: without this, the first send to a new queue waited up to a second
        for ingest. A metadata answer updates the partitions' leaders.
        """
        try:
            self._consumer.list_topics(timeout=5)
        except KafkaException as exc:
            log.warning("topic metadata lookup failed", extra={"error": str(exc)})
