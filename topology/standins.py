"""In-process stand-ins for the Kafka clients the gateway makes (its `KafkaClients`),
for the request-path microbenchmark (`bench/micro`, which wires them in as `InProcessKafka`)
and for unit tests that run the gateway's services without a broker:

* `InstantProducer` answers `send` / `send_soon` at once with a `Delivered` whose offsets
  increase per partition, as the broker's acknowledgement would.
* `LoopbackIngest` is the ingest consumer: every record produced to an assigned queue topic
  comes back on the event loop (`call_soon`, one record per batch, as the ingest thread hands
  its batches over), where, like the real consumer, it is dropped if the gateway's applied
  hint already covers it (the gateway applied it from its delivery report) and otherwise
  decoded as the real consumer decodes it (`from_record`) and handed to the gateway's batch
  handler (`MessageService.on_ingested`). So the benchmark follows whichever send path the
  gateway has: waiting for the read-back, or applying from the delivery report.
* `CountingFollower`, `NullAdmin`, `EmptyCatalog` and `CountingEvents`: a fire-and-forget
  producer that counts its records, topic administration that only remembers partition
  counts and end offsets, a catalog that starts empty, and an events publisher that counts
  what it is given.

`Log` is what the stand-in "cluster" knows, shared by them.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from collections.abc import Mapping

from topology.admin import TopicAdmin
from topology.catalog import Catalog, CatalogSnapshot, OnCatalogRecords
from topology.events import EventPublisher
from topology.follower_producer import FollowerProducer
from topology.ingest import BatchHandler, IngestConsumer
from topology.move_task_log import MoveTaskLog
from topology.owners import OwnersDirectory
from topology.presence import GatewayPresence
from topology.producer import AsyncProducer, Delivered, Linger, OnDelivered
from topology.producer_stats import CombinedStatistics, StatisticsHolder
from topology.record_format import from_record
from topology.stack_log import OnStackRecords, StackLog
from topology.topic_tail import TopicTail


class Log:
    """What the stand-in "cluster" knows: partition counts and the next offset of each."""

    def __init__(self) -> None:
        self.partitions: dict[str, int] = {}
        self.ends: dict[tuple[str, int], int] = {}
        self.ingest: LoopbackIngest | None = None
        self.produced = 0

    def append(self, topic: str, key: bytes | None, partition: int | None) -> tuple[int, int]:
        """Partition and offset of a new record."""
        if partition is None:
            count = self.partitions.get(topic, 1)
            partition = zlib.crc32(key) % count if key and count > 1 else 0
        offset = self.ends.get((topic, partition), 0)
        self.ends[(topic, partition)] = offset + 1
        self.produced += 1
        return partition, offset


class InstantProducer(AsyncProducer):
    """`AsyncProducer` whose records are acknowledged as soon as they are produced."""

    def __init__(self, log: Log) -> None:  # no librdkafka, no poll thread
        self.statistics = CombinedStatistics()
        self._log = log
        self._batch_listeners = []
        self._settled_listeners = []
        self.unsettled = 0  # records are acknowledged at once: never crowded
        self._handed = deque()  # nothing is ever handed over by a poll thread
        self._instant: list[tuple[asyncio.Future[Delivered], OnDelivered | None, Delivered]] = []

    def _produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        timestamp_ms: int,
        partition: int | None,
    ) -> Delivered:
        partition, offset = self._log.append(topic, key, partition)
        delivered = Delivered(topic, partition, offset, timestamp_ms)
        ingest = self._log.ingest
        if ingest is not None:  # it takes only the queue topics assigned to it
            ingest.produced(delivered, key, value, headers)
        return delivered

    def start(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int = 0,
        partition: int | None = None,
        on_delivered: OnDelivered | None = None,
        linger: Linger = Linger.PROMPT,
    ) -> asyncio.Future[Delivered]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Delivered] = loop.create_future()
        delivered = self._produce(topic, value, key, headers, timestamp_ms, partition)
        if not self._instant:
            # As librdkafka's poll thread does: the reports of the records produced in one
            # turn reach the loop together, in a later turn.
            loop.call_soon(self._report_all)
        self._instant.append((future, on_delivered, delivered))
        return future

    def _report_all(self) -> None:
        reports, self._instant = self._instant, []
        for future, on_delivered, delivered in reports:
            if on_delivered is not None:
                on_delivered(delivered)
            if not future.done():
                future.set_result(delivered)
        self._batch_done([future for future, _, _ in reports])

    def send_soon(
        self, topic: str, value: bytes | None, key: bytes | None = None
    ) -> asyncio.Future[Delivered]:
        future: asyncio.Future[Delivered] = asyncio.get_running_loop().create_future()
        future.set_result(self._produce(topic, value, key, None, 0, None))
        return future

    def flush(self, timeout_s: float = 30.0) -> int:
        return 0

    def close(self) -> None:
        pass


class CountingFollower(FollowerProducer):
    """`FollowerProducer` (records nobody waits for) that only counts them."""

    def __init__(self, log: Log) -> None:  # no librdkafka, no poll thread
        self.failures = 0
        self.dropped = 0
        self.last_error = ""
        self._log = log

    def produce(self, topic: str, value: bytes | None, key: bytes) -> None:
        self._log.append(topic, key, None)

    def produce_many(self, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
        for key, _ in records:
            self._log.append(topic, key, None)

    def hand_over(self) -> None:
        pass  # counted when produced

    @property
    def pending(self) -> int:
        return 0

    def flush(self, timeout_s: float = 30.0) -> int:
        return 0

    def drop_unsent(self) -> int:
        return 0  # every record was counted as sent

    def close(self) -> None:
        pass


class LoopbackIngest(IngestConsumer):
    """The ingest consumer, fed directly by `InstantProducer` instead of a Kafka fetch."""

    def __init__(
        self,
        log: Log,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
    ) -> None:
        self._loop = loop
        self._on_batch = on_batch
        self._applied = applied
        self._next: dict[tuple[str, int], int] = {}
        self.committed: list[tuple[str, int, int]] = []
        self.skipped = 0  # records the gateway had applied already
        self.handed_over = 0
        log.ingest = self

    def produced(
        self,
        delivered: Delivered,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
    ) -> None:
        where = (delivered.topic, delivered.partition)
        if where not in self._next or delivered.offset < self._next[where]:
            return  # not assigned, or before where this gateway resumes
        self._next[where] = delivered.offset + 1
        self._loop.call_soon(self._read, delivered, key, value, headers)

    def _read(
        self,
        delivered: Delivered,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
    ) -> None:
        where = (delivered.topic, delivered.partition)
        if delivered.offset <= self._applied.get(where, -1):
            self.skipped += 1
            return
        message = from_record(
            delivered.topic,
            delivered.partition,
            delivered.offset,
            key,
            value,
            delivered.timestamp_ms,
            headers,
        )
        self.handed_over += 1
        self._on_batch(delivered.topic, delivered.partition, [(delivered.offset, message)])

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None:
        for partition, offset in next_offsets.items():
            self._next[(topic, partition)] = offset

    def unassign(self, topic: str, partitions: int) -> None:
        for partition in range(partitions):
            self._next.pop((topic, partition), None)

    def commit(self, offsets: list[tuple[str, int, int]]) -> None:
        self.committed = list(offsets)


class NullAdmin(TopicAdmin):
    def __init__(self, log: Log) -> None:  # no AdminClient
        self._log = log

    def durable(self, config: dict[str, str]) -> dict[str, str]:
        return config

    def queue_durable(self, config: dict[str, str]) -> dict[str, str]:
        return config

    async def ensure_durable(self, names: list[str], queue_topics: list[str]) -> None:
        pass

    async def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        self._log.partitions.setdefault(name, partitions)

    async def delete_topic(self, name: str) -> None:
        self._log.partitions.pop(name, None)

    async def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        pass

    async def delete_records_before(self, name: str, partition: int, offset: int) -> None:
        pass

    async def end_offsets(self, name: str, partitions: int) -> list[int]:
        return [self._log.ends.get((name, p), 0) for p in range(partitions)]

    async def log_bounds(self, name: str, partitions: int) -> list[tuple[int, int]]:
        return [(0, end) for end in await self.end_offsets(name, partitions)]

    async def committed_offsets(self, group: str, name: str, partitions: int) -> list[int | None]:
        return [None] * partitions

    async def group_members(self, group: str) -> list[str]:
        return []  # the stand-in log has no consumer groups

    def partition_count(self, name: str, timeout_s: float = 10.0) -> int:
        return self._log.partitions[name]


class EmptyCatalog(Catalog):
    """The catalog of a new cluster: nothing to load; changes go to the stand-in producer."""

    async def ensure_topic(self) -> None:
        pass

    def snapshot(self, default_region: str, timeout_s: float = 30.0) -> CatalogSnapshot:
        return CatalogSnapshot({}, {}, 0)

    def follower(
        self, start_offset: int, default_region: str, on_records: OnCatalogRecords
    ) -> TopicTail:
        return IdleTail("in-process", "", start_offset, lambda batch: None)


class EmptyMoveTaskLog(MoveTaskLog):
    """The move tasks of a new cluster: nothing to load, and no other gateway writes."""

    def load(self, timeout_s: float = 30.0) -> None:
        pass

    def follow(self) -> TopicTail:
        return IdleTail("in-process", "", self.position, lambda batch: None)

    async def caught_up(self) -> bool:
        return True


class EmptyStackLog(StackLog):
    """The CloudFormation stacks of a new cluster: nothing to load, and no other gateway
    writes."""

    async def ensure_topic(self) -> None:
        pass

    def load(self, on_records: OnStackRecords, timeout_s: float = 30.0) -> int:
        return 0

    def follow(self, start_offset: int, on_records: OnStackRecords) -> TopicTail:
        return IdleTail("in-process", "", start_offset, lambda batch: None)


class IdleTail(TopicTail):
    """A catalog follower with no other gateway to hear from: starts no thread."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        pass


class CountingEvents(EventPublisher):
    def __init__(self) -> None:  # no librdkafka, no poll thread
        self.statistics = StatisticsHolder()
        self.count = 0

    @property
    def dropped(self) -> dict[str, int]:
        return {}

    @property
    def published(self) -> int:
        return self.count

    @property
    def buffered(self) -> int:
        return 0

    def publish(self, key: bytes, value: bytes) -> bool:
        self.count += 1
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        pass


class AlonePresence(GatewayPresence):
    """A presence on a log nobody else reads: joined at once, never anyone else there."""

    def __init__(self) -> None:
        pass

    def start(self) -> None:
        pass

    def joined(self, timeout_s: float) -> bool:
        return True

    def close(self) -> None:
        pass


class EmptyOwnersDirectory(OwnersDirectory):
    """The owners directory of a new cluster: nothing to load; what this gateway publishes
    (through the stand-in producer) is what it knows."""

    def load(self, timeout_s: float = 30.0) -> None:
        pass
