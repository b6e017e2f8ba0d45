"""Reading a queue topic's records by coordinates: what replay tasks and browsing read.

The lease store keeps the messages a queue still holds; the log keeps every message sent
until the topic's retention ends, deleted or not. `LogReader` reads that log with a consumer
of its own that belongs to no group (partitions assigned by hand, nothing committed), so
reading never moves the queue's consumer-group offsets or anything else a consumer sees.

Blocking calls, for a worker thread (`run_in_executor`); one reader is used by one thread at
a time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from lease_store.records import StoredMessage
from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.consuming import decode_queue_record, poll_batch, watermarks
from topology.producer import coordinates

log = logging.getLogger("kqs.log_reader")

TIMEOUT_S = 10.0
# How long one read waits for records the broker has not sent yet.
POLL_WAIT_S = 0.5


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """A queue-topic record, decoded."""

    partition: int
    offset: int
    message: StoredMessage


class LogReader:
    def __init__(self, bootstrap: str) -> None:
        self._consumer = Consumer(
            {
                **connection(bootstrap),
                "group.id": "kqs-log-reader",  # required by librdkafka; never joined
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                # Below the log start (retention or a purge moved it): read from there.
                "auto.offset.reset": "earliest",
                "enable.partition.eof": False,
                "logger": LIBRDKAFKA,
            }
        )
        self._topic = ""
        self._ends: dict[int, int] = {}
        self._positions: dict[int, int] = {}

    def close(self) -> None:
        self._consumer.close()

    def partition_count(self, topic: str) -> int:
        return len(self._consumer.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)

    def bounds(self, topic: str, partitions: int) -> list[tuple[int, int]]:
        """(log start offset, end offset) of each partition, indexed by partition."""
        return [
            watermarks(self._consumer, TopicPartition(topic, p), TIMEOUT_S)
            for p in range(partitions)
        ]

    def offsets_at(self, topic: str, partitions: int, at_ms: int) -> list[int]:
        """Per partition, the first offset whose record was written at `at_ms` or later (the
        end offset when none was)."""
        asked = [TopicPartition(topic, p, at_ms) for p in range(partitions)]
        found = self._consumer.offsets_for_times(asked, timeout=TIMEOUT_S)
        ends = [high for _, high in self.bounds(topic, partitions)]
        return [tp.offset if tp.offset >= 0 else ends[tp.partition] for tp in found]

    def open(self, topic: str, positions: dict[int, int], ends: dict[int, int]) -> None:
        """Read `topic` from `positions` (partition -> offset) up to `ends` (exclusive)."""
        self._topic = topic
        self._ends = dict(ends)
        self._positions = {p: o for p, o in positions.items() if o < ends.get(p, 0)}
        self._consumer.assign(
            [TopicPartition(topic, p, offset) for p, offset in self._positions.items()]
        )

    @property
    def done(self) -> bool:
        return not self._positions

    def read(self, max_records: int) -> list[LoggedMessage]:
        """The next records of the opened range, each partition's in log order (at most
        `max_records`; fewer only when the range ends or the broker is slow)."""
        out: list[LoggedMessage] = []
        while self._positions and len(out) < max_records:
            batch = poll_batch(self._consumer, POLL_WAIT_S, max_records - len(out))
            if not batch:
                if not self._skip_removed():
                    break
                continue
            for msg in batch:
                if msg.error():
                    log.warning("log read error", extra={"error": str(msg.error())})
                    continue
                _, partition, offset = coordinates(msg)
                end = self._ends.get(partition, 0)
                if partition not in self._positions or offset >= end:
                    continue  # fetched past the range's end
                _, message = decode_queue_record(msg)
                out.append(LoggedMessage(partition, offset, message))
                self._positions[partition] = offset + 1
                if offset + 1 >= end:
                    self._finished(partition)
        return out

    def _skip_removed(self) -> bool:
        """After a read that found nothing: end the partitions whose records left in range
        were removed meanwhile (retention, a purge); whether any was."""
        ended = False
        for partition in list(self._positions):
            low, high = watermarks(self._consumer, TopicPartition(self._topic, partition), 5)
            if low >= self._ends[partition] or self._positions[partition] >= high:
                self._finished(partition)
                ended = True
        return ended

    def _finished(self, partition: int) -> None:
        self._positions.pop(partition, None)
        self._consumer.incremental_unassign([TopicPartition(self._topic, partition)])

    def read_window(self, topic: str, partition: int, start: int, end: int) -> list[LoggedMessage]:
        """The records of one partition in [start, end), in log order (browsing)."""
        self.open(topic, {partition: start}, {partition: end})
        out: list[LoggedMessage] = []
        while not self.done:
            got = self.read(end - start)
            if not got and not self.done:
                continue
            out.extend(got)
        return out
