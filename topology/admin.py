"""Topic administration (create, delete, configure, trim) as awaitable calls."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)


class TopicAdmin:
    def __init__(self, bootstrap: str, replication_factor: int = 1) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._replication_factor = replication_factor

    async def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        """Create a topic; an existing topic of that name is accepted as is."""
        futures = self._admin.create_topics(
            [NewTopic(name, partitions, self._replication_factor, config=config)]
        )
        try:
            await _wait(futures[name])
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    async def delete_topic(self, name: str) -> None:
        futures = self._admin.delete_topics([name])
        try:
            await _wait(futures[name])
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise

    async def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        resource = ConfigResource("topic", name, set_config=config)
        futures = self._admin.alter_configs([resource])
        await _wait(futures[resource])

    async def delete_records_before(self, name: str, partition: int, offset: int) -> None:
        """Kafka DeleteRecords: advance the log start offset of a partition to `offset`."""
        futures = self._admin.delete_records([TopicPartition(name, partition, offset)])
        for future in futures.values():
            await _wait(future)

    async def end_offsets(self, name: str, partitions: int) -> list[int]:
        """The end offset (high watermark: the next offset to be written) of each partition.

        Indexed by partition number. Raises KafkaException if the broker does not answer.
        """
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = self._admin.list_offsets(
            {TopicPartition(name, p): latest for p in range(partitions)}
        )
        ends = [0] * partitions
        for tp, future in futures.items():
            info = await _wait(future)
            ends[tp.partition] = int(info.offset)
        return ends

    def partition_count(self, name: str, timeout_s: float = 10.0) -> int:
        metadata = self._admin.list_topics(name, timeout=timeout_s)
        return len(metadata.topics[name].partitions)


async def _wait(future: concurrent.futures.Future[Any]) -> Any:
    return await asyncio.wrap_future(future)
