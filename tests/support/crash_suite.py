"""What the crash suite's runs share: their size (`KQS_CRASH_SIZE`), the figures they print,
the check that the queues end empty, and the FIFO workload's queues and accounting."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from dataclasses import dataclass

from tests.support.crash_workload import RECEIVE_WAIT_S
from tests.support.crash_workload_fifo import VISIBILITY_TIMEOUT_S as FIFO_VISIBILITY_TIMEOUT_S
from tests.support.crash_workload_fifo import FifoWorkload
from tests.support.harness import json_client
from tests.support.lease_ledger import describe


@dataclass(frozen=True)
class Size:
    # One gateway carrying a standard and a FIFO workload: its SIGKILLs, then (another run)
    # its broker's.
    gateway_kills: int
    broker_kills: int
    queues: int
    producers: int
    consumers: int
    # Scale-out: broker SIGKILLs under two gateways sharing the partitions.
    group_broker_kills: int
    # Scale-out: times a third gateway joins the two serving the load and leaves again
    # (SIGTERM and SIGKILL in turn), then times it is stopped past its session and woken.
    hand_overs: int
    stops: int
    # Scale-out on the 3-broker cluster: gateway SIGKILLs among three, broker SIGKILLs,
    # brokers stopped (SIGSTOP) past the group session, gateways cut off the network.
    cluster_gateway_kills: int
    cluster_broker_kills: int
    cluster_broker_stops: int
    cluster_cuts: int


# The reduced size runs in CI (every fault at least once, the crash tests ~6 min at load
# 15-20 on a 2-core machine); `KQS_CRASH_SIZE=full` runs the sizes the issues ask for.
SIZES = {
    "reduced": Size(
        gateway_kills=3,
        broker_kills=1,
        queues=3,
        producers=2,
        consumers=2,
        group_broker_kills=1,
        hand_overs=2,
        stops=1,
        cluster_gateway_kills=2,
        cluster_broker_kills=1,
        cluster_broker_stops=1,
        # One cut: a cut gateway's late changelog writes must not undo the next owner's work
        # (owner epochs, topology/changelog.py).
        cluster_cuts=1,
    ),
    "full": Size(
        gateway_kills=20,
        broker_kills=5,
        queues=4,
        producers=4,
        consumers=4,
        group_broker_kills=5,
        hand_overs=20,
        stops=10,
        cluster_gateway_kills=10,
        cluster_broker_kills=3,
        cluster_broker_stops=3,
        cluster_cuts=5,
    ),
}


def _sized(base: Size, overrides: str) -> Size:
    """`base` with `overrides` ("cluster_cuts=8,cluster_gateway_kills=0"): one fault run
    alone and more often, to corner what a run found."""
    changes = dict(item.split("=", 1) for item in overrides.split(",") if item.strip())
    return dataclasses.replace(base, **{k.strip(): int(v) for k, v in changes.items()})


SIZE = _sized(
    SIZES[os.environ.get("KQS_CRASH_SIZE", "reduced")], os.environ.get("KQS_CRASH_SIZES", "")
)
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


def fifo_queues(endpoint: str, count: int) -> list[str]:
    sqs = json_client(endpoint)
    return [
        sqs.create_queue(
            QueueName=f"crashfifo-{i}-{uuid.uuid4().hex[:8]}.fifo",
            Attributes={"FifoQueue": "true", "VisibilityTimeout": str(FIFO_VISIBILITY_TIMEOUT_S)},
        )["QueueUrl"]
        for i in range(count)
    ]


def finish_fifo(workload: FifoWorkload, endpoint: str, urls: list[str], cycles: str) -> None:
    """After the fault cycles: drain the FIFO workload, report its figures, account for every
    message, and check that its queues end empty."""
    workload.stop_producing()
    workload.drain(timeout_s=24 * FIFO_VISIBILITY_TIMEOUT_S)
    report(
        f"FIFO: acknowledged but not yet deleted after the drain: {len(workload.ledger.undeleted())}"
    )
    wait_until_empty(endpoint, urls, timeout_s=6 * FIFO_VISIBILITY_TIMEOUT_S)
    workload.stop()
    verdict = workload.ledger.verdict()
    report(f"{cycles}; {verdict.summary()}")
    assert verdict.crashed == [], "\n".join(verdict.crashed)
    assert verdict.acknowledged > 0
    assert verdict.lost == [], f"acknowledged but never delivered: {verdict.lost[:20]}"
    assert verdict.enqueued_twice == [], f"one send, two messages: {verdict.enqueued_twice[:20]}"
    assert verdict.wrong_id == [], f"delivered under another id: {verdict.wrong_id[:20]}"
    assert verdict.out_of_order == [], verdict.out_of_order[:20]
    assert verdict.corrupt == [], verdict.corrupt[:20]
    assert verdict.twice_inside_a_lease == 0, describe(
        workload.ledger.leases.twice_inside_a_lease()
    )
    assert_empty(endpoint, urls)
