"""Topic administration (create, delete, configure, trim) as awaitable calls.

Every call is bounded by `REQUEST_TIMEOUT_S`: with the broker gone, librdkafka would
otherwise keep an admin request (and the SQS request waiting on it) for `socket.timeout.ms`
(60 s) or, for the broker lookup, indefinitely. A timed-out call raises KafkaException,
which the gateway answers as a retryable ServiceUnavailable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

from topology.client_properties import connection

log = logging.getLogger("kqs.admin")

# Below the SQS SDKs' default read timeout (60 s) and the producer's delivery timeout (15 s,
# `topology/producer.py`), so a CreateQueue fails on the admin call before anything else.
REQUEST_TIMEOUT_S = 10.0
# Topics per CreateTopics request: large batches are cheap for the controller, but one
# request's answer waits for all its topics.
_CREATE_CHUNK = 500

# The topics that hold a durable record (queue topics, the catalog) fsync every appended batch
# before the broker acknowledges it: with one node there is no replica to fall back on after a
# power loss. A batch is what one produce request carries for a partition, so concurrent sends
# share one fsync. Other topics (`__kqs_events`, `__kqs_leases`, consumer offsets) are copies
# or analytics and are left to the OS page cache (docs/ARCHITECTURE.md, "Durability").
FSYNC_EACH_APPEND = {"flush.messages": "1"}
# Queue topics whose records the gateway itself syncs to disk (the embedded broker,
# topology/segment_sync.py): no flush per append (Kafka's default), and a flush a minute by the
# broker's log flusher, which moves the partition's recovery point on, so that a broker
# restarted after an unclean shutdown re-reads at most about a minute of each log.
SYNCED_BY_GATEWAY = {"flush.messages": str(2**63 - 1), "flush.ms": "60000"}

# ListOffsets answered with a stale leader epoch: tries in all (see `_list_offsets`).
_LIST_OFFSETS_ATTEMPTS = 3
_STALE_LEADER = frozenset(
    {
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)
# incremental_alter_configs resources per request when existing topics are brought in line.
_ALTER_CHUNK = 500
# A replication factor of -1 asks the broker for its `default.replication.factor` (KIP-464),
# so topics get the replicas the cluster is set up for without a KQS setting to keep in step.
USE_CLUSTER_DEFAULT = -1


class TopicAdmin:
    def __init__(
        self,
        bootstrap: str,
        replication_factor: int = USE_CLUSTER_DEFAULT,
        fsync_durable_topics: bool = True,
        gateway_syncs_queues: bool = False,
    ) -> None:
        # No `logger`: confluent-kafka serves its lines from poll(), which nothing calls on an
        # admin client, so they would pile up in memory; librdkafka writes them to stderr.
        config: dict[str, Any] = {
            **connection(bootstrap),
            "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
            "socket.connection.setup.timeout.ms": 5_000,
        }
        self._config = config
        self._admin = AdminClient(config)
        self._replication_factor = replication_factor
        self._fsync = fsync_durable_topics
        self._gateway_syncs_queues = fsync_durable_topics and gateway_syncs_queues
        # Topics to create in the next CreateTopics request, with the calls waiting on each.
        self._to_create: dict[str, tuple[NewTopic, list[asyncio.Future[None]]]] = {}
        self._creating: asyncio.Task[None] | None = None

    def durable(self, config: dict[str, str]) -> dict[str, str]:
        """`config` for a topic that holds a durable record: fsync per append if configured."""
        return {**config, **FSYNC_EACH_APPEND} if self._fsync else config

    def queue_durable(self, config: dict[str, str]) -> dict[str, str]:
        """`config` for a queue topic: as `durable`, unless the gateway syncs its records."""
        return (
            {**config, **SYNCED_BY_GATEWAY} if self._gateway_syncs_queues else self.durable(config)
        )

    async def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        """Create a topic; an existing topic of that name is accepted as is.

        Topics asked for while a creation request is with the broker go together in the next
        request (see `_create_waiting`). The call is bounded by `REQUEST_TIMEOUT_S` from its
        own start, as a lone request is, however long the request before it takes: with the
        broker gone, a caller would otherwise wait for that request's timeout and then its
        own.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        _, waiters = self._to_create.setdefault(
            name, (NewTopic(name, partitions, self._replication_factor, config=config), [])
        )
        waiters.append(waiter)
        if self._creating is None or self._creating.done():
            self._creating = asyncio.create_task(self._create_waiting())
        try:
            await asyncio.wait_for(waiter, REQUEST_TIMEOUT_S)
        except TimeoutError:
            waiting = self._to_create.get(name)
            if waiting is not None and waiting[1] == [waiter]:
                del self._to_create[name]  # not sent yet, and nobody else wants it
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"topic {name} not created in time")
            ) from None

    async def _create_waiting(self) -> None:
        """Create the waiting topics, one CreateTopics request at a time, until none wait.

        The KRaft controller commits each request to its metadata log on its own: measured
        on the embedded broker, 500 topics asked for in 500 concurrent requests were created
        at 29 a second, in one request at 6,111 a second. Concurrent CreateQueue calls (a
        deployment creating its queues, seed 004's 10,000) share requests this way, while a
        lone one is sent at once.
        """
        while self._to_create:
            batch = dict(list(self._to_create.items())[:_CREATE_CHUNK])
            for name in batch:
                del self._to_create[name]
            try:
                futures = self._admin.create_topics(
                    [topic for topic, _ in batch.values()],
                    operation_timeout=REQUEST_TIMEOUT_S,
                    request_timeout=REQUEST_TIMEOUT_S,
                )
                for name, (_, waiters) in batch.items():
                    try:
                        await _wait(futures[name])
                    except KafkaException as exc:
                        already = exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
                        _settle(waiters, None if already else exc)
                    else:
                        _settle(waiters, None)
            except BaseException as exc:  # refused as a whole, or cancelled: none may hang
                for _, waiters in batch.values():
                    _settle(waiters, exc)
                if not isinstance(exc, Exception):
                    raise

    async def delete_topic(self, name: str) -> None:
        futures = self._admin.delete_topics(
            [name], operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
        )
        try:
            await _wait(futures[name])
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise

    async def ensure_durable(self, names: list[str], queue_topics: list[str]) -> None:
        """Bring existing durable topics in line with `durable()` and queue topics with
        `queue_durable()`; a no-op without fsync.

        Topics created before per-topic fsync relied on the embedded broker's broker-wide
        `log.flush.interval.messages=1`, which is gone; a queue topic's flush setting follows
        whether this gateway or the broker syncs its records.
        """
        if self._fsync:
            queue_config = self.queue_durable({})
            await self._alter(
                {name: FSYNC_EACH_APPEND for name in names}
                | {name: queue_config for name in queue_topics}
            )

    async def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        """Set some of a topic's settings; the others keep their values."""
        await self._alter({name: config})

    async def _alter(self, configs: dict[str, dict[str, str]]) -> None:
        # Incremental: the older AlterConfigs would reset every setting it is not given.
        names = list(configs)
        for start in range(0, len(names), _ALTER_CHUNK):
            resources = [
                ConfigResource(
                    "topic",
                    name,
                    incremental_configs=[
                        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                        for key, value in configs[name].items()
                    ],
                )
                for name in names[start : start + _ALTER_CHUNK]
            ]
            futures = self._admin.incremental_alter_configs(
                resources, request_timeout=REQUEST_TIMEOUT_S
            )
            for future in futures.values():
                await _wait(future)

    async def topic_config(self, name: str) -> dict[str, str]:
        """The topic's configuration as the broker applies it (defaults included): what
        `kqs peek` and PeekMessages show of a queue topic's `retention.ms`."""
        resource = ConfigResource("topic", name)
        futures = self._admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
        (future,) = futures.values()
        entries = await _wait(future)
        return {key: str(entry.value) for key, entry in entries.items() if entry.value is not None}

    async def delete_records_before(self, name: str, partition: int, offset: int) -> None:
        """Kafka DeleteRecords: advance the log start offset of a partition to `offset`."""
        futures = self._admin.delete_records(
            [TopicPartition(name, partition, offset)],
            operation_timeout=REQUEST_TIMEOUT_S,
            request_timeout=REQUEST_TIMEOUT_S,
        )
        for future in futures.values():
            await _wait(future)

    async def end_offsets(self, name: str, partitions: int) -> list[int]:
        """The end offset (high watermark: the next offset to be written) of each partition.

        Indexed by partition number. Raises KafkaException if the broker does not answer.
        """
        return await self._list_offsets(name, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    async def log_bounds(self, name: str, partitions: int) -> list[tuple[int, int]]:
        """(log start offset, end offset) of each partition, indexed by partition number."""
        starts = await self._list_offsets(name, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        ends = await self.end_offsets(name, partitions)
        return list(zip(starts, ends, strict=True))

    async def _list_offsets(self, name: str, partitions: int, spec: OffsetSpec) -> list[int]:
        """ListOffsets, asked again with fresh metadata when the partition's leader changed.

        After a broker restart a partition's leader epoch grows; librdkafka's admin client
        keeps sending its cached epoch, is answered FENCED_LEADER_EPOCH, and neither refreshes
        its metadata nor retries (librdkafka #4620, as Kafka's own client did before
        KAFKA-9535): the crash suite's broker kills under two gateways saw one retry a second
        for minutes, the partitions never taken. So: refresh the metadata and ask again, and
        the last time with a new client.
        """
        for attempt in range(_LIST_OFFSETS_ATTEMPTS):
            try:
                return await self._list_offsets_once(name, partitions, spec)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                stale = isinstance(error, KafkaError) and error.code() in _STALE_LEADER
                if not stale or attempt == _LIST_OFFSETS_ATTEMPTS - 1:
                    raise
                log.info("stale partition leader: metadata refreshed", extra={"topic": name})
                await asyncio.get_running_loop().run_in_executor(
                    None, self._refresh_metadata, name, attempt == _LIST_OFFSETS_ATTEMPTS - 2
                )
        raise AssertionError("unreachable")

    def _refresh_metadata(self, name: str, new_client: bool) -> None:
        if new_client:
            self._admin = AdminClient(self._config)
        self._admin.list_topics(name, timeout=REQUEST_TIMEOUT_S)

    async def _list_offsets_once(self, name: str, partitions: int, spec: OffsetSpec) -> list[int]:
        futures = self._admin.list_offsets(
            {TopicPartition(name, p): spec for p in range(partitions)},
            request_timeout=REQUEST_TIMEOUT_S,
        )
        offsets = [0] * partitions
        for tp, future in futures.items():
            offsets[tp.partition] = int((await _wait(future)).offset)
        return offsets

    async def committed_offsets(self, group: str, name: str, partitions: int) -> list[int | None]:
        """The consumer group's committed offset of each partition (None: never committed)."""
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(name, p) for p in range(partitions)]
        )
        futures = self._admin.list_consumer_group_offsets(
            [request], request_timeout=REQUEST_TIMEOUT_S
        )
        answer = await _wait(futures[group])
        committed: list[int | None] = [None] * partitions
        for tp in answer.topic_partitions:
            if tp.error is None and tp.offset >= 0:
                committed[tp.partition] = int(tp.offset)
        return committed

    async def group_members(self, group: str) -> list[str]:
        """The live members of a consumer group, each as `client_id@host` (none for a group
        that is empty or unknown; consumers that only assign partitions are never members)."""
        attempts = 0
        while True:
            futures = self._admin.describe_consumer_groups(
                [group], request_timeout=REQUEST_TIMEOUT_S
            )
            try:
                description = await _wait(futures[group])
            except KafkaException as exc:
                # The group's coordinator moving or loading (a broker just started, a group
                # just made) is answered NOT_COORDINATOR for a moment: ask again.
                attempts += 1
                moving = exc.args[0].code() in _COORDINATOR_MOVING
                if not moving or attempts == _COORDINATOR_ATTEMPTS:
                    raise
                await asyncio.sleep(0.2 * attempts)
                continue
            return [f"{member.client_id}@{member.host}" for member in description.members]

    def partition_count(self, name: str, timeout_s: float = 10.0) -> int:
        metadata = self._admin.list_topics(name, timeout=timeout_s)
        return len(metadata.topics[name].partitions)


_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)
_COORDINATOR_ATTEMPTS = 6  # about 4 s of waiting in all


async def _wait(future: concurrent.futures.Future[Any]) -> Any:
    return await asyncio.wrap_future(future)


def _settle(waiters: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for waiter in waiters:
        if waiter.done():
            continue  # its caller was cancelled
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)
