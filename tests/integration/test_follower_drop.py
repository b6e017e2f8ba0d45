"""`FollowerProducer.drop_unsent`: the changelog records a gateway that lost its partitions
had not got into Kafka never get there, and the producer goes on working (real broker)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import uuid

import pytest

from tests.support.harness import free_port
from tests.support.kafka_reads import read_keys
from topology.admin import TopicAdmin
from topology.follower_producer import FollowerProducer
from topology.producer import ProduceFailed


def _new_topic(bootstrap: str) -> str:
    topic = f"kqs-test-follower-{uuid.uuid4().hex[:8]}"
    asyncio.run(TopicAdmin(bootstrap).create_topic(topic, 1, {}))
    return topic


def test_records_waiting_for_an_absent_broker_are_dropped_and_their_waiters_fail() -> None:
    follower = FollowerProducer(f"127.0.0.1:{free_port()}", "test-follower", confirmed=True)
    try:
        for i in range(3):
            follower.produce("kqs-test-changelog", b"fact", f"key-{i}".encode())
        confirmation = follower.hand_over()
        assert confirmation is not None and not confirmation.done()
        follower.produce("kqs-test-changelog", b"fact", b"noted-only")

        noted = follower.drop_unsent()  # 1, unless the poll thread handed it over first

        with pytest.raises(ProduceFailed):
            confirmation.result(timeout=10)
        deadline = time.monotonic() + 10  # the poll thread serves the other reports too
        while noted + follower.dropped < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert noted + follower.dropped == 4 and follower.failures == 0
    finally:
        follower.drop_unsent()
        follower.close()


def test_the_producer_delivers_again_after_dropping(kafka_bootstrap: str) -> None:
    # Given a follower that delivered, then had records dropped before they were sent
    topic = _new_topic(kafka_bootstrap)
    follower = FollowerProducer(kafka_bootstrap, "test-follower")
    try:
        follower.produce(topic, b"fact", b"before")
        assert follower.flush(30) == 0
        for i in range(100):
            follower.produce(topic, b"fact", f"dropped-{i}".encode())
        follower.hand_over()  # into librdkafka's queue, lingering
        follower.drop_unsent()

        # When it produces again
        follower.produce(topic, b"fact", b"after")
        remaining = follower.flush(30)
    finally:
        follower.close()

    # Then the later record is delivered after the earlier one (idempotence intact)
    assert remaining == 0
    keys = read_keys(kafka_bootstrap, topic)
    assert keys[0] == b"before" and keys[-1] == b"after"


def test_a_confirmed_follower_confirms_again_after_dropping(kafka_bootstrap: str) -> None:
    topic = _new_topic(kafka_bootstrap)
    follower = FollowerProducer(kafka_bootstrap, "test-follower", confirmed=True)
    try:
        follower.produce(topic, b"fact", b"before")
        first = follower.hand_over()
        assert first is not None
        first.result(timeout=30)
        follower.drop_unsent()

        follower.produce(topic, b"fact", b"after")
        second = follower.hand_over()
        assert isinstance(second, concurrent.futures.Future) and second is not first
        second.result(timeout=30)
    finally:
        follower.close()
