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
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

# Below the SQS SDKs' default read timeout (60 s) and the producer's delivery timeout (15 s,
# `topology/producer.py`), so a CreateQueue fails on the admin call before anything else.
REQUEST_TIMEOUT_S = 10.0


class TopicAdmin:
    def __init__(self, bootstrap: str, replication_factor: int = 1) -> None:
        self._admin = AdminClient(
            {
                "bootstrap.servers": bootstrap,
                "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
                "socket.connection.setup.timeout.ms": 5_000,
            }
        )
        self._replication_factor = replication_factor

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

    async def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        resource = ConfigResource("topic", name, set_config=config)
        futures = self._admin.alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
        await _wait(futures[resource])

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
