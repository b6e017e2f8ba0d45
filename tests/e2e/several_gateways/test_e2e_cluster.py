"""KQS on a replicated cluster: three jar brokers (replication factor 3, min.insync.replicas
2), as `compose/` runs them, with gateways in front; both protocols.

Every topic KQS creates gets the cluster's three replicas without a KQS setting, and with one
broker SIGKILLed (the leader of the queue's partition, so a new leader must be elected) sends,
receives and deletes keep working: `acks=all` needs two in-sync replicas, and two remain. The
last test runs the whole compose deployment: three gateways sharing the partitions (group
mode), a message sent through one, received through another, deleted through the third, with
a broker down.

With KQS_TEST_SECURE_CLUSTER=1 (tests/conftest.py `kafka_cluster`) the same tests run against
the cluster with SASL_SSL listeners, the authorizer on and the gateways holding only the
documented ACLs (tests/support/secure_kafka.py `secure_cluster`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from botocore.exceptions import ClientError
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
)

from tests.support.harness import ACCOUNT_ID, GatewayProcess, KafkaCluster, client_for
from topology.names import CATALOG_TOPIC, EVENTS_TOPIC, LEASES_TOPIC

# Time for the cluster to have every replica of every partition in sync again after a
# restarted broker rejoins.
ISR_BOUND_S = 90.0


@pytest.fixture(scope="module")
def cluster_gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = GatewayProcess(
        tmp_path_factory.mktemp("cluster-gateway"),
        kafka_cluster.bootstrap,
        env=kafka_cluster.gateway_login,
    )
    process.start(timeout_s=120)
    yield process
    process.stop()


@pytest.fixture
def sqs_on_cluster(cluster_gateway: GatewayProcess, protocol: str) -> Any:
    return client_for(protocol, cluster_gateway.endpoint)


def admin_of(cluster: KafkaCluster) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10_000, **cluster.login}
    )


def queue_topic(admin: AdminClient, name: str) -> str:
    prefix = f"kqs.{ACCOUNT_ID}.{name}."
    (topic,) = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    return topic


def replicas_and_isr(admin: AdminClient, topic: str) -> list[tuple[int, int]]:
    """(replicas, in-sync replicas) of each partition of `topic`."""
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return [(len(p.replicas), len(p.isrs)) for p in partitions.values()]


def wait_until_fully_in_sync(admin: AdminClient, topics: list[str]) -> None:
    deadline = time.monotonic() + ISR_BOUND_S
    while True:
        if all(isr == replicas for t in topics for replicas, isr in replicas_and_isr(admin, t)):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas not back in sync within {ISR_BOUND_S} s")
        time.sleep(0.5)


def min_insync_replicas(admin: AdminClient, topic: str) -> str:
    resource = ConfigResource("topic", topic)
    (future,) = admin.describe_configs([resource], request_timeout=10).values()
    value: str = future.result()["min.insync.replicas"].value
    return value


def test_every_topic_kqs_creates_has_three_replicas_and_needs_two_in_sync(
    kafka_cluster: KafkaCluster, sqs_on_cluster: Any
) -> None:
    # Given
    name = f"replicated-{uuid.uuid4().hex[:12]}"
    # When
    sqs_on_cluster.create_queue(QueueName=name)
    # Then
    admin = admin_of(kafka_cluster)
    for topic in (queue_topic(admin, name), CATALOG_TOPIC, LEASES_TOPIC, EVENTS_TOPIC):
        assert {replicas for replicas, _ in replicas_and_isr(admin, topic)} == {3}, topic
        assert min_insync_replicas(admin, topic) == "2", topic


def test_send_receive_and_delete_keep_working_with_one_broker_killed(
    kafka_cluster: KafkaCluster, sqs_on_cluster: Any
) -> None:
    # Given: a queue, and the broker leading its partition killed
    name = f"one-down-{uuid.uuid4().hex[:12]}"
    url = sqs_on_cluster.create_queue(QueueName=name)["QueueUrl"]
    admin = admin_of(kafka_cluster)
    topic = queue_topic(admin, name)
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    kafka_cluster.kill(leader - 1)  # node ids are 1, 2, 3
    try:
        # When
        bodies = {f"body-{i}" for i in range(5)}
        for body in sorted(bodies):
            sqs_on_cluster.send_message(QueueUrl=url, MessageBody=body)
        received: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while not bodies <= received.keys() and time.monotonic() < deadline:
            answer = sqs_on_cluster.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2
            )
            for message in answer.get("Messages", []):
                received[message["Body"]] = message["ReceiptHandle"]
        for handle in received.values():
            sqs_on_cluster.delete_message(QueueUrl=url, ReceiptHandle=handle)
        # Then: every message arrived (a retried send may have added a copy), and is gone
        assert bodies <= received.keys()
        new_leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        assert new_leader != leader
        counts = sqs_on_cluster.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        assert counts == {
            "ApproximateNumberOfMessages": "0",
            "ApproximateNumberOfMessagesNotVisible": "0",
        }
    finally:
        kafka_cluster.restart(leader - 1)
        wait_until_fully_in_sync(admin, [topic, CATALOG_TOPIC, LEASES_TOPIC])


def retrying_unavailable(call: Callable[[], object], bound_s: float = 30.0) -> None:
    """Call, retrying a retryable `ServiceUnavailable` (as SDKs do) for at most `bound_s`: a
    broker's death can move the ingest group's coordinator, and the partitions moving with
    the rebalance have no owner for a moment."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            call()
            return
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ServiceUnavailable" or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def three_gateways(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    """Three gateways sharing the queues' partitions, as compose/'s scale-out profile."""
    env = {
        "KQS_PARTITION_OWNERSHIP": "group",
        "KQS_RECEIPT_SECRET": "the-cluster-tests-shared-secret",
        "KQS_PARTITIONS": "3",
        **kafka_cluster.gateway_login,
    }
    gateways = [
        GatewayProcess(tmp_path_factory.mktemp(f"cluster-gw-{i}"), kafka_cluster.bootstrap, env=env)
        for i in range(3)
    ]
    try:
        for gateway in gateways:
            gateway.start(timeout_s=120)
        yield gateways
    finally:
        for gateway in gateways:
            gateway.stop()


def test_three_gateways_share_a_queue_with_one_broker_killed(
    kafka_cluster: KafkaCluster, three_gateways: list[GatewayProcess], protocol: str
) -> None:
    # Given: a queue created through the first gateway, and a broker down
    first, second, third = (client_for(protocol, g.endpoint) for g in three_gateways)
    url = first.create_queue(QueueName=f"three-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    kafka_cluster.kill(2)
    admin = admin_of(kafka_cluster)
    try:
        # When: sent through the first, received through the second, deleted through the third
        bodies = {f"shared-{i}" for i in range(6)}
        for body in sorted(bodies):
            first.send_message(QueueUrl=url, MessageBody=body)
        received: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while not bodies <= received.keys() and time.monotonic() < deadline:
            answer = second.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2, VisibilityTimeout=60
            )
            for message in answer.get("Messages", []):
                assert message["Body"] not in received, "delivered twice"
                received[message["Body"]] = message["ReceiptHandle"]
        for handle in received.values():
            retrying_unavailable(partial(third.delete_message, QueueUrl=url, ReceiptHandle=handle))
        # Then
        assert received.keys() == bodies
        counts = first.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        assert counts == {
            "ApproximateNumberOfMessages": "0",
            "ApproximateNumberOfMessagesNotVisible": "0",
        }
    finally:
        kafka_cluster.restart(2)
        wait_until_fully_in_sync(admin, [CATALOG_TOPIC, LEASES_TOPIC])
