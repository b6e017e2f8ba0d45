"""With one gateway, ingest does not read back the records the gateway applied itself: a
real librdkafka consumer on the test broker, driven step by step from the test instead of
its own thread. A partition whose whole log is applied is paused; another producer's record
resumes it, where the applied run ends, once the log end is read or when the gateway wakes
it (a gap before one of its own records)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from lease_store.records import StoredMessage
from topology import ingest as ingest_module
from topology.ingest import Batch, IngestConsumer
from topology.record_format import to_headers

BOUND_S = 15.0


class Harness:
    def __init__(self, bootstrap: str) -> None:
        self.topic = f"kqs.000000000000.paused.{uuid.uuid4().hex}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(self.topic, 1, 1)]).values():
            future.result()
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        self.loop = asyncio.new_event_loop()
        self.applied: dict[tuple[str, int], int] = {}
        self.handed_over: list[int] = []
        self.consumer = IngestConsumer(bootstrap, self.loop, self._on_batch, self.applied)

    def _on_batch(self, topic: str, partition: int, batch: Batch) -> None:
        self.handed_over += [offset for offset, _ in batch]

    def produce(self, count: int) -> None:
        """Records as a producer other than the gateway writes them."""
        for _ in range(count):
            message = StoredMessage(str(uuid.uuid4()), b"body", sent_ms=int(time.time() * 1000))
            headers: list[tuple[str, str | bytes | None]] = [*to_headers(message, True)]
            self.producer.produce(self.topic, value=message.body, key=b"k", headers=headers)
        assert self.producer.flush(10) == 0

    def step_until(self, done: object, what: str) -> None:
        """Run the ingest thread's rounds here until `done()` holds."""
        deadline = time.monotonic() + BOUND_S
        while time.monotonic() < deadline:
            self.consumer._step()
            self.loop.run_until_complete(asyncio.sleep(0))  # hand-overs run on the loop
            if done():  # type: ignore[operator]
                return
        raise AssertionError(f"not within {BOUND_S} s: {what}")

    @property
    def paused(self) -> bool:
        return (self.topic, 0) in self.consumer._paused


@pytest.fixture
def harness(kafka_bootstrap: str) -> Iterator[Harness]:
    made = Harness(kafka_bootstrap)
    yield made
    made.consumer._consumer.close()
    made.loop.close()


def test_a_partition_the_gateway_applied_whole_is_paused_and_read_again_from_where_it_ended(
    harness: Harness,
) -> None:
    # Given five records the gateway applied itself (from their delivery reports), and
    # ingest assigned after them
    harness.produce(5)
    harness.applied[(harness.topic, 0)] = 4
    harness.consumer.assign(harness.topic, {0: 5})

    # When ingest reads the log end: everything there is applied
    harness.step_until(lambda: harness.paused, "the partition paused")

    # Then another producer's record resumes it at once after the applied run: handed over,
    # and nothing the gateway applied is
    harness.produce(1)
    harness.step_until(lambda: harness.handed_over, "the other producer's record")
    assert harness.handed_over == [5]
    # And once that is applied too, the partition is paused again
    harness.applied[(harness.topic, 0)] = 5
    harness.step_until(lambda: harness.paused, "paused again")


def test_a_wake_reads_a_paused_partition_before_the_next_look_at_the_log_ends(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a paused partition whose log ends ingest will not read again for a minute
    harness.produce(3)
    harness.applied[(harness.topic, 0)] = 2
    harness.consumer.assign(harness.topic, {0: 3})
    harness.step_until(lambda: harness.paused, "the partition paused")
    monkeypatch.setattr(ingest_module, "LOG_END_CHECK_S", 60.0)
    harness.consumer._next_end_check = time.monotonic() + 60.0

    # When another producer writes to it and the gateway, seeing the gap before one of its
    # own records, wakes it
    harness.produce(2)
    harness.consumer.wake(harness.topic, 0)

    # Then ingest reads those records now
    harness.step_until(lambda: len(harness.handed_over) == 2, "both records")
    assert harness.handed_over == [3, 4]


class FailingLogEnds:
    """The real consumer, except that reading log ends fails as it did for seconds after a
    broker restart ("Failed to get offsets: Local: Unknown partition")."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def offsets_for_times(self, *args: object, **kwargs: object) -> object:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))

    def __getattr__(self, name: str) -> object:
        return getattr(self._consumer, name)


def test_when_the_log_ends_cannot_be_read_every_partition_is_read(harness: Harness) -> None:
    # Given a paused partition
    harness.produce(2)
    harness.applied[(harness.topic, 0)] = 1
    harness.consumer.assign(harness.topic, {0: 2})
    harness.step_until(lambda: harness.paused, "the partition paused")

    # When a look at the log ends fails
    real = harness.consumer._consumer
    harness.consumer._consumer = FailingLogEnds(real)  # type: ignore[assignment]
    harness.consumer._next_end_check = 0.0
    harness.step_until(lambda: not harness.paused, "the partition resumed")

    # Then ingest reads it again: another producer's record is handed over
    harness.produce(1)
    harness.step_until(lambda: harness.handed_over == [2], "the other producer's record")
    harness.consumer._consumer = real
