"""`FollowerProducer` after the process stood still: the changelog records noted before the
stall wait `SETTLE_S` for the loss of the partitions (`drop_unsent`) instead of being handed to
librdkafka on waking, where they could land after the partitions' next owner's records."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid

import pytest

from tests.support.clocks import Monotonic
from tests.support.harness import free_port
from tests.support.kafka_reads import read_keys
from topology.admin import TopicAdmin
from topology.follower_producer import FollowerProducer
from topology.producer import ProduceFailed
from topology.stall import SETTLE_S, STALL_S


def _confirmed_follower(bootstrap: str) -> tuple[str, Monotonic, FollowerProducer]:
    """A new one-partition topic, and a confirmed follower on a clock the test moves (its
    poll thread reads it too)."""
    topic = f"kqs-test-follower-{uuid.uuid4().hex[:8]}"
    asyncio.run(TopicAdmin(bootstrap).create_topic(topic, 1, {}))
    clock = Monotonic()
    return (
        topic,
        clock,
        FollowerProducer(bootstrap, "test-follower", confirmed=True, monotonic=clock),
    )


def test_records_noted_before_a_stall_wait_and_are_dropped_with_the_lost_partitions() -> None:
    # Given a confirmed follower (several gateways)
    clock = Monotonic()
    follower = FollowerProducer(
        f"127.0.0.1:{free_port()}", "test-follower", confirmed=True, monotonic=clock
    )
    try:
        # When the process stood still past the stall threshold (its poll thread noted no
        # pass), and on waking a record is noted and a sync hands over (moved first: the
        # poll thread, which this test cannot stop, would hand a record noted earlier over)
        clock.now += STALL_S + 1
        follower.produce("kqs-test-changelog", b"fact", b"noted-before-the-stall")
        held = follower.hand_over()

        # Then the record stays noted (not in librdkafka's queue), its waiters wait...
        assert held is not None and not held.done()
        assert list(follower._noted) == [("kqs-test-changelog", b"noted-before-the-stall")]
        # ...and the loss of the partitions drops it and fails them, as a move
        assert follower.drop_unsent() == 1
        with pytest.raises(ProduceFailed) as failed:
            held.result(timeout=1)
        assert failed.value.dropped
    finally:
        follower.close()


def test_records_held_after_a_stall_the_group_did_not_act_on_go_once_the_hold_ends(
    kafka_bootstrap: str,
) -> None:
    topic, clock, follower = _confirmed_follower(kafka_bootstrap)
    try:
        # Given a record handed over during the hold that follows a stall
        clock.now += STALL_S + 1
        follower.produce(topic, b"fact", b"held")
        held = follower.hand_over()
        assert held is not None and not held.done()

        # When the hold ends with no loss (the poll thread hands over on its next pass)
        clock.now += SETTLE_S

        # Then the record goes to Kafka and its waiters are answered by its acknowledgement
        held.result(timeout=30)
    finally:
        follower.close()
    assert read_keys(kafka_bootstrap, topic) == [b"held"]


def test_a_flush_during_the_hold_delivers(kafka_bootstrap: str) -> None:
    # A release (revocation: the partitions are still this gateway's) or a shutdown flushes
    # what is noted even during a hold
    topic, clock, follower = _confirmed_follower(kafka_bootstrap)
    try:
        clock.now += STALL_S + 1
        follower.produce(topic, b"fact", b"flushed")
        held = follower.hand_over()
        assert isinstance(held, concurrent.futures.Future) and not held.done()

        assert follower.flush(30) == 0
        held.result(timeout=30)
    finally:
        follower.close()
    assert read_keys(kafka_bootstrap, topic) == [b"flushed"]


def test_one_gateway_never_holds() -> None:
    # With one gateway the changelog is a copy nobody restores from while this one lives
    clock = Monotonic()
    follower = FollowerProducer(f"127.0.0.1:{free_port()}", "test-follower", monotonic=clock)
    try:
        follower.produce("kqs-test-changelog", b"fact", b"key")
        clock.now += STALL_S + 1
        follower.hand_over()
        assert not follower._noted  # in librdkafka's queue
    finally:
        follower.drop_unsent()
        follower.close()
