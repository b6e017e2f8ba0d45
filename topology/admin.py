"""Topic administration (create, delete, configure, trim) as awaitable calls.

Every call is bounded by `REQUEST_TIMEOUT_S`: with the broker gone, librdkafka would
otherwise keep an admin request (and the SQS request waiting on it) for `socket.timeout.ms`
(60 s) or, for the broker lookup, indefinitely. A timed-out call raises KafkaException,
which the gateway answers as a retryable ServiceUnavailable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
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

from topology.client_log import LIBRDKAFKA

# Below the SQS SDKs' default read timeout (60 s) and the producer's delivery timeout (15 s,
# `topology/producer.py`), so a CreateQueue fails on the admin call before anything else.
REQUEST_TIMEOUT_S = 10.0

# The topics that hold a durable record (queue topics, the catalog) fsync every appended batch
# before the broker acknowledges it: with one node there is no replica to fall back on after a
# power loss. A batch is what one produce request carries for a partition, so concurrent sends
# share one fsync. Other topics (`__kqs_events`, `__kqs_leases`, consumer offsets) are copies
# or analytics and are left to the OS page cache (docs/ARCHITECTURE.md, "Durability").
FSYNC_EACH_APPEND = {"flush.messages": "1"}
# incremental_alter_configs resources per request when existing topics are brought in line.
_ALTER_CHUNK = 500


class TopicAdmin:
    def __init__(
        self, bootstrap: str, replication_factor: int = 1, fsync_durable_topics: bool = True
    ) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
            "socket.connection.setup.timeout.ms": 5_000,
            "logger": LIBRDKAFKA,
        }
        self._admin = AdminClient(config)
        self._replication_factor = replication_factor
        self._fsync = fsync_durable_topics

    def durable(self, config: dict[str, str]) -> dict[str, str]:
        """`config` for a topic that holds a durable record: fsync per append if configured."""
        return {**config, **FSYNC_EACH_APPEND} if self._fsync else config

    async def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        """Create a topic; an existing topic of that name is accepted as is."""
        futures = self._admin.create_topics(
            [NewTopic(name, partitions, self._replication_factor, config=config)],
            operation_timeout=REQUEST_TIMEOUT_S,
            request_timeout=REQUEST_TIMEOUT_S,
        )
        try:
            await _wait(futures[name])
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
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

    async def ensure_durable(self, names: list[str]) -> None:
        """Bring existing durable topics in line with `durable()`; a no-op without fsync.

        Topics created before per-topic fsync relied on the embedded broker's broker-wide
        `log.flush.interval.messages=1`, which is gone.
        """
        if self._fsync:
            await self._alter({name: FSYNC_EACH_APPEND for name in names})

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

    def partition_count(self, name: str, timeout_s: float = 10.0) -> int:
        metadata = self._admin.list_topics(name, timeout=timeout_s)
        return len(metadata.topics[name].partitions)


async def _wait(future: concurrent.futures.Future[Any]) -> Any:
    return await asyncio.wrap_future(future)
