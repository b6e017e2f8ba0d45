"""What the crash suite's runs share: their size (`KQS_CRASH_SIZE`), the figures they print,
and the check that the queues end empty."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from tests.support.crash_workload import RECEIVE_WAIT_S
from tests.support.harness import json_client


@dataclass(frozen=True)
class Size:
    gateway_kills: int
    broker_kills: int
    queues: int
    producers: int
    consumers: int
    # Scale-out run: times a third gateway joins the two serving the load and leaves again.
    hand_overs: int = 3
    # Scale-out run: times the third of three gateways is stopped past its session and woken.
    stops: int = 2
    # Scale-out on the 3-broker cluster: gateway SIGKILLs among three, then broker SIGKILLs.
    cluster_gateway_kills: int = 3
    cluster_broker_kills: int = 1


SIZES = {
    "reduced": Size(gateway_kills=4, broker_kills=2, queues=3, producers=2, consumers=2),
    "full": Size(
        gateway_kills=20,
        broker_kills=5,
        queues=4,
        producers=4,
        consumers=4,
        hand_overs=10,
        stops=10,
        cluster_gateway_kills=10,
        cluster_broker_kills=3,
    ),
}
SIZE = SIZES[os.environ.get("KQS_CRASH_SIZE", "reduced")]
# How long the queues must stay empty at the end: longer than a receive in flight takes.
EMPTY_FOR_S = 2 * RECEIVE_WAIT_S + 2


def report(line: str) -> None:
    print(line)  # noqa: T201 - the figures are the point of this suite


def left_behind(endpoint: str, urls: list[str]) -> list[tuple[str, dict[str, str]]]:
    """The queues whose counters are not all 0 (every message that landed should have been
    consumed and deleted), with their counters."""
    sqs = json_client(endpoint)
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    left = []
    for url in urls:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if attributes != dict.fromkeys(names, "0"):
            left.append((url, attributes))
    return left


def assert_empty(endpoint: str, urls: list[str], stories: list[str] | None = None) -> None:
    """The queues end empty; `stories`: what happened to each message delivered but never
    deleted, shown when they do not."""
    left = left_behind(endpoint, urls)
    assert not left, f"{left} at {time.monotonic():.1f}; delivered, never deleted: {stories}"


def wait_until_empty(endpoint: str, urls: list[str], timeout_s: float) -> None:
    """Wait until the queues read empty twice, `EMPTY_FOR_S` apart.

    Messages from sends that failed but landed are consumed too, and one may appear late: a
    record the broker kept although the gateway answered the send with an error is read by
    the ingest consumer once it has caught up after a broker restart. One empty read can
    fall just before it does; the second read comes after any receive in flight then has
    ended. At the deadline it returns, and `assert_empty` reports what is left.
    """
    deadline = time.monotonic() + timeout_s
    empty_since: float | None = None
    while time.monotonic() < deadline:
        if left_behind(endpoint, urls):
            empty_since = None
        elif empty_since is None:
            empty_since = time.monotonic()
        elif time.monotonic() - empty_since >= EMPTY_FOR_S:
            return
        time.sleep(0.5)
