"""Reading back what a test wrote to Kafka, with a plain consumer."""

from __future__ import annotations

import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition


def read_keys(bootstrap: str, topic: str) -> list[bytes]:
    """The keys of the records in partition 0 of `topic`, from its beginning to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-follower-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    keys: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for _ in range(100):  # bounded: the records are there once flushed
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                break  # end of the partition
            key = msg.key()
            assert isinstance(key, bytes)
            keys.append(key)
    finally:
        consumer.close()
    return keys
