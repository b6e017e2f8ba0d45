"""Message replay tasks and browsing with two gateways sharing the queues' partitions (group
mode), on this module's own broker (a group of gateways beside the session's single gateway
would not be a deployment). Both protocols in each test: one gateway is asked in JSON and the
other in Query, and their answers must be the same.

One pair serves the whole module: queues have two partitions, each gateway serves one of a
source queue's. A task runs on the gateway it was started through; the other lists it from
the task log and writes a cancel there; when its runner stops, the source queue's next home
runs it on (after `KQS_REPLAY_ORPHANED_AFTER_S`, shortened here). A browse through either
gateway reads the lease state of each partition where it is served. The last test kills a
gateway of the pair: it runs last. Every wait is bounded polling.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.group_mode import BOUND_S
from tests.support.harness import GatewayProcess, gateway_pair
from tests.support.move_tasks import (
    PARTITIONS,
    SECRET,
    a_queue_split_between,
    eventually,
    home_and_other,
)
from tests.support.replay import (
    replay_client,
    replayed_origins,
    wait_until_ended,
)

ENV = {"KQS_REPLAY_ORPHANED_AFTER_S": "3", "KQS_REPLAY_CHECKPOINT_S": "1"}


@pytest.fixture(scope="module")
def kafka_bootstrap(own_kafka_bootstrap: str) -> str:
    return own_kafka_bootstrap


@pytest.fixture(scope="module")
def gateways(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    with gateway_pair(tmp_path_factory.mktemp, kafka_bootstrap, SECRET, PARTITIONS, ENV) as pair:
        yield pair


def clients_of(gateways: list[GatewayProcess], protocol: str) -> list[Any]:
    return [replay_client(protocol, g.endpoint) for g in gateways]


def crossed(gateways: list[GatewayProcess]) -> list[Any]:
    """A client of each gateway, JSON for the first and Query for the second: one run of a
    test goes through both protocols, and their answers are compared."""
    return [
        replay_client("json", gateways[0].endpoint),
        replay_client("query", gateways[1].endpoint),
    ]


def a_split_queue(gateways: list[GatewayProcess], kqs: Any, bootstrap: str, prefix: str) -> str:
    url, _ = a_queue_split_between(gateways, kqs, bootstrap, prefix)
    return url


def send_through_both(clients: list[Any], url: str, count: int, prefix: str = "m") -> None:
    """`count` messages, sent in batches through each gateway in turn: a standard send goes
    to a partition its gateway serves, so both partitions get some."""
    for start in range(0, count, 10):
        clients[(start // 10) % 2].send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "MessageBody": f"{prefix}{start + i}"}
                for i in range(min(10, count - start))
            ],
        )


def tasks_through(kqs: Any, url: str) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = kqs.list_message_replay_tasks(QueueUrl=url)["Tasks"]
    return tasks


def visible(kqs: Any, url: str) -> int:
    attributes = kqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_running_task_is_listed_the_same_and_cancelled_through_the_other_gateway(
    gateways: list[GatewayProcess], kafka_bootstrap: str
) -> None:
    # Given a slow replay (5 a second) of 40 messages of both partitions into another queue,
    # started through one gateway (JSON; the other is asked in Query)
    clients = crossed(gateways)
    source = a_split_queue(gateways, clients[0], kafka_bootstrap, "replay-src")
    destination = clients[0].create_queue(QueueName=f"replay-dst-{uuid.uuid4().hex[:12]}")[
        "QueueUrl"
    ]
    since_ms = int(time.time() * 1000) - 1000
    send_through_both(clients, source, 40)
    runner, other = clients
    handle = runner.start_message_replay_task(
        QueueUrl=source,
        SinceTimestamp=since_ms,
        DestinationQueueUrl=destination,
        MaxNumberOfMessagesPerSecond=5,
    )["TaskHandle"]

    # When it has replayed some, both gateways list it the same, progress included
    def listed_alike() -> list[dict[str, Any]] | None:
        seen = tasks_through(other, source)
        if seen[0]["ApproximateNumberOfMessagesReplayed"] < 5:
            return None
        return seen if tasks_through(runner, source) == seen else None

    (running,) = eventually(listed_alike, "the task listed alike through both gateways")
    assert running["Status"] == "RUNNING"
    assert running["TaskHandle"] == handle
    assert running["ApproximateNumberOfMessagesToReplay"] == 40

    # When it is cancelled through the gateway that does not run it
    replayed = other.cancel_message_replay_task(TaskHandle=handle)[
        "ApproximateNumberOfMessagesReplayed"
    ]

    # Then it stops: CANCELLED, listed the same through both, short of the 40, and the
    # destination holds what it says it replayed, no more
    task = wait_until_ended(other, source, timeout_s=BOUND_S)
    assert task["Status"] == "CANCELLED", task
    assert replayed <= task["ApproximateNumberOfMessagesReplayed"] < 40
    assert tasks_through(runner, source) == tasks_through(other, source)
    assert eventually(
        lambda: (
            True
            if visible(other, destination) == task["ApproximateNumberOfMessagesReplayed"]
            else None
        ),
        "the destination holding what the task replayed",
    )
    time.sleep(1.5)  # past another batch and checkpoint, had the runner gone on
    assert tasks_through(runner, source) == [task]
    assert visible(runner, destination) == task["ApproximateNumberOfMessagesReplayed"]
    # And it cannot be cancelled again, through either gateway
    for kqs in clients:
        with pytest.raises(ClientError) as again:
            kqs.cancel_message_replay_task(TaskHandle=handle)
        assert again.value.response["Error"]["Code"] == "ResourceNotFoundException"


def counts(kqs: Any, url: str) -> dict[str, str]:
    attributes: dict[str, str] = kqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"
    ]
    return {k: v for k, v in attributes.items() if k.startswith("ApproximateNumberOfMessages")}


def test_a_browse_through_either_gateway_shows_every_partitions_state(
    gateways: list[GatewayProcess], kafka_bootstrap: str
) -> None:
    # Given a queue with, on each gateway's partition, a deleted, an in-flight, a visible
    # (received once, then made visible again) and a delayed message
    clients = crossed(gateways)
    url = a_split_queue(gateways, clients[0], kafka_bootstrap, "peek")
    for i, kqs in enumerate(clients):
        for state in ("deleted", "in flight", "visible"):
            kqs.send_message(QueueUrl=url, MessageBody=f"{state} {i}")
        kqs.send_message(QueueUrl=url, MessageBody=f"delayed {i}", DelaySeconds=600)
    taken: dict[str, str] = {}
    deadline = time.monotonic() + BOUND_S
    while len(taken) < 6 and time.monotonic() < deadline:
        for kqs in clients:
            answer = kqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
            )
            taken |= {m["Body"]: m["ReceiptHandle"] for m in answer.get("Messages", [])}
    assert len(taken) == 6, taken
    for body, receipt_handle in taken.items():
        if body.startswith("deleted"):
            clients[0].delete_message(QueueUrl=url, ReceiptHandle=receipt_handle)
        elif body.startswith("visible"):
            clients[1].change_message_visibility(
                QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=0
            )
    before = counts(clients[0], url)

    # When it is browsed through each gateway (JSON and Query)
    pages = [kqs.peek_messages(QueueUrl=url, MaxNumberOfMessages=10) for kqs in clients]

    # Then both show the same: each message's real state and receive count, whichever
    # gateway serves its partition, and nothing changed by looking
    assert pages[0]["Messages"] == pages[1]["Messages"]
    seen = {
        m["Body"]: (m["Attributes"]["KqsStatus"], m["Attributes"].get("ApproximateReceiveCount"))
        for m in pages[0]["Messages"]
    }
    assert seen == {
        **{f"deleted {i}": ("DELETED", None) for i in (0, 1)},
        **{f"in flight {i}": ("IN_FLIGHT", "1") for i in (0, 1)},
        **{f"visible {i}": ("VISIBLE", "1") for i in (0, 1)},
        **{f"delayed {i}": ("DELAYED", "0") for i in (0, 1)},
    }
    assert {m["Attributes"]["KqsPartition"] for m in pages[0]["Messages"]} == {"0", "1"}
    in_flight = [m for m in pages[0]["Messages"] if m["Body"].startswith("in flight")]
    for message in in_flight:
        assert int(message["Attributes"]["KqsVisibleAtTimestamp"]) > time.time() * 1000 + 500_000
    assert counts(clients[0], url) == counts(clients[1], url) == before
    # And a status filter sees the other gateway's partition too
    for kqs in clients:
        flying = kqs.peek_messages(QueueUrl=url, Statuses=["IN_FLIGHT"])["Messages"]
        assert sorted(m["Body"] for m in flying) == ["in flight 0", "in flight 1"]


def test_a_task_whose_runner_stops_is_run_on_by_the_next_home_with_nothing_replayed_twice(
    gateways: list[GatewayProcess], kafka_bootstrap: str
) -> None:
    # Given two replays of 600 messages of both partitions, one started in each protocol
    # through the home of the source queue, which runs them (100 a second each), two thirds
    # done
    json_clients, query_clients = clients_of(gateways, "json"), clients_of(gateways, "query")
    source, topic = a_queue_split_between(gateways, json_clients[0], kafka_bootstrap, "runon")
    home, other = home_and_other(gateways, kafka_bootstrap, topic)
    since_ms = int(time.time() * 1000) - 1000
    send_through_both(json_clients, source, 600)
    destinations = {}
    for name, clients in (("json", json_clients), ("query", query_clients)):
        destination_name = f"runon-{name}-{uuid.uuid4().hex[:12]}"
        destination = clients[home].create_queue(QueueName=destination_name)["QueueUrl"]
        destinations[name] = (destination_name, destination)
        clients[home].start_message_replay_task(
            QueueUrl=source,
            SinceTimestamp=since_ms,
            DestinationQueueUrl=destination,
            MaxNumberOfMessagesPerSecond=100,
        )

    def both_under_way() -> bool | None:
        tasks = tasks_through(json_clients[other], source)
        under_way = [t for t in tasks if t["ApproximateNumberOfMessagesReplayed"] >= 400]
        return True if len(under_way) == 2 else None

    eventually(both_under_way, "both tasks under way")
    time.sleep(0.5)  # past a batch or two since the last checkpoint

    # When their runner, the home, is SIGKILLed
    gateways[home].kill()

    # Then the other gateway, the next home, runs both on to their end, and lists them the
    # same in both protocols; each source record is in each destination once
    for clients in (json_clients, query_clients):
        task = wait_until_ended(clients[other], source, timeout_s=60)
        assert task["Status"] == "COMPLETED", task
    tasks = tasks_through(json_clients[other], source)
    assert tasks == tasks_through(query_clients[other], source)
    assert [t["Status"] for t in tasks] == ["COMPLETED", "COMPLETED"]
    assert [t["ApproximateNumberOfMessagesReplayed"] for t in tasks] == [600, 600]
    for destination_name, destination in destinations.values():
        found = replayed_origins(kafka_bootstrap, destination_name)
        assert len(found) == 600
        assert set(found.values()) == {1}, [k for k, n in found.items() if n > 1][:10]
        assert visible(json_clients[other], destination) == 600
    assert "message replay task run on" in gateways[other].log_path.read_text()
