"""FIFO queues on Kafka: a group's records on one partition, keyed by the group, in order;
and the deduplication window surviving a gateway crash and a lost lease store.

Each test runs its own gateway with four partitions per queue, through both protocols.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.fifo_support import unique
from tests.support.harness import ACCOUNT_ID, GatewayProcess, json_client, query_client
from topology.catalog import group_partition

PARTITIONS = 4


@pytest.fixture
def own_gateway(kafka_bootstrap: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(
        tmp_path / "gateway", kafka_bootstrap, env={"KQS_PARTITIONS": str(PARTITIONS)}
    )
    process.start()
    yield process
    process.stop()


def client(protocol: str, gateway: GatewayProcess) -> Any:
    return json_client(gateway.endpoint) if protocol == "json" else query_client(gateway.endpoint)


def new_fifo_queue(sqs: Any) -> tuple[str, str]:
    name = f"{unique('kfifo')}.fifo"
    url: str = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    return name, url


def topic_of(bootstrap: str, queue_name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    prefix = f"kqs.{ACCOUNT_ID}.{queue_name}."
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if topics:
            return topics[0]
        time.sleep(0.1)
    raise AssertionError(f"no topic for {queue_name}")


def read_topic(bootstrap: str, topic: str, expected: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    records: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 15
        while len(records) < expected and time.monotonic() < deadline:
            record = consumer.poll(1)
            if record is not None and record.error() is None:
                records.append(record)
    finally:
        consumer.close()
    return records


def send(sqs: Any, url: str, body: str, group: str, dedup: str) -> dict[str, Any]:
    sent: dict[str, Any] = sqs.send_message(
        QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=dedup
    )
    return sent


def test_a_groups_records_share_a_partition_keyed_by_the_group_in_order(
    own_gateway: GatewayProcess, protocol: str, kafka_bootstrap: str
) -> None:
    # Given groups that hash to different partitions
    sqs = client(protocol, own_gateway)
    name, url = new_fifo_queue(sqs)
    groups = ["alpha", "beta", "gamma", "delta", "epsilon"]
    assert len({group_partition(g, PARTITIONS) for g in groups}) > 1
    # When four messages per group are sent, interleaved
    sent = {(g, i): send(sqs, url, f"{g}-{i}", g, f"{g}-{i}") for i in range(4) for g in groups}
    # Then a Kafka consumer finds each group on its partition, keyed by the group, in order,
    # with the message id in a header
    records = read_topic(kafka_bootstrap, topic_of(kafka_bootstrap, name), len(sent))
    assert len(records) == len(sent)
    for g in groups:
        mine = [r for r in records if r.key() == g.encode()]
        assert {r.partition() for r in mine} == {group_partition(g, PARTITIONS)}
        assert [r.value().decode() for r in mine] == [f"{g}-{i}" for i in range(4)]
        ids = [dict(r.headers())["sqs.message-id"].decode() for r in mine]
        assert ids == [sent[(g, i)]["MessageId"] for i in range(4)]
        numbers = [sent[(g, i)]["SequenceNumber"] for i in range(4)]
        assert numbers == sorted(numbers)
        assert [int(n) for n in numbers] == [r.offset() for r in mine]


def test_deduplication_window_survives_a_gateway_crash(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given an acknowledged FIFO message, received and deleted
    sqs = client(protocol, own_gateway)
    _, url = new_fifo_queue(sqs)
    first = send(sqs, url, "once", "g", "d-crash")
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # When the gateway is killed and started again
    own_gateway.kill()
    own_gateway.start()
    sqs = client(protocol, own_gateway)
    # Then the same deduplication id is still answered with the original, and not enqueued
    again = send(sqs, url, "twice", "g", "d-crash")
    assert (again["MessageId"], again["SequenceNumber"]) == (
        first["MessageId"],
        first["SequenceNumber"],
    )
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)


def test_deduplication_window_survives_a_lost_lease_store(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given a FIFO message received and deleted, and another of its group waiting
    sqs = client(protocol, own_gateway)
    _, url = new_fifo_queue(sqs)
    first = send(sqs, url, "deleted", "g", "d-gone")
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # and group L's head in flight for ten minutes, its second message behind it
    send(sqs, url, "L1", "L", "d-L1")
    send(sqs, url, "L2", "L", "d-L2")
    [head] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600, WaitTimeSeconds=2)["Messages"]
    assert head["Body"] == "L1"
    waiting = send(sqs, url, "waiting", "g", "d-waiting")
    # (a lease reaches the changelog a few tens of ms after its receive: one younger than
    # that is lost with the store, and its message delivered again, still in order)
    time.sleep(1)
    # When the gateway crashes and its lease store is lost, so it is rebuilt from Kafka
    own_gateway.kill()
    shutil.rmtree(own_gateway.data_dir / "leases")
    own_gateway.start()
    sqs = client(protocol, own_gateway)
    # Then both deduplication ids are still known, and only the waiting message is delivered
    # (group L stays locked behind its head)
    assert send(sqs, url, "again", "g", "d-gone")["MessageId"] == first["MessageId"]
    assert send(sqs, url, "again", "g", "d-waiting")["MessageId"] == waiting["MessageId"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    assert [m["Body"] for m in received["Messages"]] == ["waiting"]
    assert "rebuilding the lease store" in own_gateway.log_path.read_text()
