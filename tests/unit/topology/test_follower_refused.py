"""A record librdkafka refuses at once (over its size limit) neither stops the changelog's
follower producer nor leaves a waiter waiting forever (`FollowerProducer._hand_over`).

No broker is needed: librdkafka checks the size when the record is produced, before any
connection; the follower points at a port where nothing listens.
"""

from __future__ import annotations

import time

import pytest

from tests.support.harness import free_port
from topology.follower_producer import FollowerProducer
from topology.producer import ProduceFailed
from topology.record_format import MAX_RECORD_BYTES

TOO_LARGE = b"x" * (MAX_RECORD_BYTES + 1024)
TOPIC = "kqs-test-follower-refused"


def test_a_refused_last_record_fails_the_confirmation_instead_of_leaving_it_unsettled() -> None:
    follower = FollowerProducer(f"127.0.0.1:{free_port()}", "test-refused", confirmed=True)
    try:
        follower.produce(TOPIC, b"fine", key=b"a")
        follower.produce(TOPIC, TOO_LARGE, key=b"b")
        confirmation = follower.hand_over()
        assert confirmation is not None
        with pytest.raises(ProduceFailed, match="(?i)size"):
            confirmation.result(timeout=1)
        assert follower.failures == 1
        # The next hand-over names a record of its own, not the refused one's marker.
        follower.produce(TOPIC, b"fine", key=b"c")
        assert follower.hand_over() is not confirmation
    finally:
        follower.drop_unsent()
        follower._stopping.set()


def test_a_refused_record_fails_the_confirmation_of_the_records_handed_over_with_it() -> None:
    follower = FollowerProducer(f"127.0.0.1:{free_port()}", "test-refused-mid", confirmed=True)
    try:
        follower.produce(TOPIC, TOO_LARGE, key=b"a")
        follower.produce(TOPIC, b"fine", key=b"b")  # the last: its delivery would confirm all
        confirmation = follower.hand_over()
        assert confirmation is not None
        with pytest.raises(ProduceFailed, match="(?i)size"):
            confirmation.result(timeout=1)
    finally:
        follower.drop_unsent()
        follower._stopping.set()


def test_the_follower_thread_goes_on_handing_over_after_a_refused_record() -> None:
    follower = FollowerProducer(f"127.0.0.1:{free_port()}", "test-refused-thread")
    try:
        follower.produce(TOPIC, TOO_LARGE, key=b"a")
        deadline = time.monotonic() + 5
        while follower.failures == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert follower.failures == 1
        follower.produce(TOPIC, b"fine", key=b"b")
        while follower._noted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert follower._poller.is_alive()
        assert not follower._noted  # handed over by the thread: waiting in librdkafka
    finally:
        follower.drop_unsent()
        follower._stopping.set()
