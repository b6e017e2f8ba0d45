"""`FollowerProducer.produce_many`: a commit's lease facts noted in one call reach Kafka as
the same records one `produce` each would have made (real broker)."""

from __future__ import annotations

import asyncio
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from topology.admin import TopicAdmin
from topology.follower_producer import FollowerProducer


def _records(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-follower-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for _ in range(100):  # bounded: the records are there once flushed
            if len(out) == count:
                break
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def _via(
    bootstrap: str, many: bool, records: list[tuple[bytes, bytes | None]]
) -> list[tuple[bytes | None, bytes | None]]:
    topic = f"kqs-test-follower-{uuid.uuid4().hex[:8]}"
    asyncio.run(TopicAdmin(bootstrap).create_topic(topic, 1, {}))
    follower = FollowerProducer(bootstrap, "test-follower")
    try:
        if many:
            follower.produce_many(topic, records)
        else:
            for key, value in records:
                follower.produce(topic, value, key=key)
        assert follower.flush(30) == 0
    finally:
        follower.close()
    return _records(bootstrap, topic, 3)


def test_records_noted_together_reach_kafka_as_records_noted_one_by_one(
    kafka_bootstrap: str,
) -> None:
    # Given facts of one commit: two keys, a tombstone, and a key changed twice before the
    # hand-over (received, then received again)
    records: list[tuple[bytes, bytes | None]] = [
        (b"p/00000/1", b"leased"),
        (b"p/00000/2", b"leased"),
        (b"p/00000/1", b"leased-again"),
        (b"p/00000/3", None),
    ]

    # When they are noted in one call, and, on another topic, one call each
    together = _via(kafka_bootstrap, True, records)
    one_by_one = _via(kafka_bootstrap, False, records)

    # Then Kafka holds the same records: each key once, with its last value, in first-noted order
    assert (
        together
        == one_by_one
        == [
            (b"p/00000/1", b"leased-again"),
            (b"p/00000/2", b"leased"),
            (b"p/00000/3", None),
        ]
    )
