"""A gateway whose lease store is lost or corrupt rebuilds it from `__kqs_leases` + the log."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from lease_store.keys import PartitionKey
from lease_store.memory import MemoryKeyValueStore
from tests.support.harness import GatewayProcess, eventually, json_client
from tests.support.prometheus_text import scrape
from topology.consuming import as_bytes
from topology.names import LEASES_TOPIC
from topology.rebuild import RebuildStopped, RebuildTarget, rebuild_leases


@pytest.fixture
def own_gateway(kafka_bootstrap: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of this test alone, so it can be killed without disturbing others."""
    process = GatewayProcess(tmp_path / "gateway", kafka_bootstrap)
    process.start()
    yield process
    process.stop()


def _delete_leases(lease_dir: Path) -> None:
    shutil.rmtree(lease_dir)


def _corrupt_leases(lease_dir: Path) -> None:
    for path in lease_dir.iterdir():
        if path.name == "CURRENT" or path.name.startswith("MANIFEST"):
            path.write_bytes(b"\x00garbage\xff" * 64)


def _receive(sqs: Any, url: str, count: int, visibility_s: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=count,
        VisibilityTimeout=visibility_s,
        AttributeNames=["All"],
        WaitTimeSeconds=1,
    ).get("Messages", [])
    return messages


def _changelog_caught_up(gateway: GatewayProcess) -> bool | None:
    exposition = scrape(gateway.endpoint)
    assert "kqs_lease_changelog_pending" in exposition.samples
    return True if exposition.value("kqs_lease_changelog_pending") == 0 else None


def _counts(sqs: Any, url: str) -> dict[str, str]:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attributes: dict[str, str] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)[
        "Attributes"
    ]
    return attributes


@pytest.mark.parametrize("damage", [_delete_leases, _corrupt_leases], ids=["deleted", "corrupt"])
def test_lost_lease_store_is_rebuilt_with_deletes_leases_and_receive_counts(
    own_gateway: GatewayProcess, damage: Any
) -> None:
    # Given: m0 in flight for 10 minutes, m1 received twice (visible again), m2 received
    # twice and deleted, m3 and m4 never received
    sqs = json_client(own_gateway.endpoint)
    url = sqs.create_queue(QueueName=f"rebuild-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    [m0] = _receive(sqs, url, 1, 600)
    assert m0["Body"] == "m0"
    assert sorted(m["Body"] for m in _receive(sqs, url, 2, 0)) == ["m1", "m2"]
    twice = {m["Body"]: m for m in _receive(sqs, url, 2, 0)}
    assert sorted(twice) == ["m1", "m2"]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in twice.values()} == {"2"}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=twice["m2"]["ReceiptHandle"])
    for i in range(3, 5):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    assert _counts(sqs, url)["ApproximateNumberOfMessages"] == "3"
    # and the changelog has caught up (with one gateway it follows the synced lease store,
    # lagging by up to the follower's linger)
    eventually(lambda: _changelog_caught_up(own_gateway), "the changelog caught up", 10)
    # When the gateway crashes and its lease store is lost
    own_gateway.kill()
    lease_dir = own_gateway.data_dir / "leases"
    damage(lease_dir)
    own_gateway.start()
    sqs = json_client(own_gateway.endpoint)
    # Then the counts are exact
    assert _counts(sqs, url) == {
        "ApproximateNumberOfMessages": "3",
        "ApproximateNumberOfMessagesNotVisible": "1",
        "ApproximateNumberOfMessagesDelayed": "0",
    }
    # and only the visible messages are delivered, m1 with its receive history kept
    delivered = {m["Body"]: m for m in _receive(sqs, url, 10, 600)}
    assert sorted(delivered) == ["m1", "m3", "m4"]
    m1 = delivered["m1"]["Attributes"]
    assert m1["ApproximateReceiveCount"] == "3"
    first_receive = twice["m1"]["Attributes"]["ApproximateFirstReceiveTimestamp"]
    assert m1["ApproximateFirstReceiveTimestamp"] == first_receive
    assert delivered["m3"]["Attributes"]["ApproximateReceiveCount"] == "1"
    assert _receive(sqs, url, 10, 600) == []
    # and the in-flight message's old receipt handle still deletes it
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m0["ReceiptHandle"])
    assert "rebuilding the lease store" in own_gateway.log_path.read_text()
    if damage is _corrupt_leases:
        assert list(lease_dir.parent.glob("leases.corrupt-*"))


def _changelog_latest(bootstrap: str, prefix: str) -> dict[bytes, bytes | None]:
    """The latest value of every `__kqs_leases` key that starts with `prefix`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kqs-test-changelog"})
    try:
        partition = TopicPartition(LEASES_TOPIC, 0)
        low, high = consumer.get_watermark_offsets(partition, timeout=10)
        consumer.assign([TopicPartition(LEASES_TOPIC, 0, low)])
        latest: dict[bytes, bytes | None] = {}
        position = low
        while position < high:
            message = consumer.poll(5)
            assert message is not None, f"changelog read stalled at {position} of {high}"
            assert message.error() is None, message.error()
            position = (message.offset() or 0) + 1
            key = as_bytes(message.key())
            if key is not None and key.startswith(prefix.encode()):
                latest[key] = as_bytes(message.value())
        return latest
    finally:
        consumer.close()


def test_deleted_queue_leaves_only_tombstones_in_the_changelog(
    own_gateway: GatewayProcess,
) -> None:
    # Given a queue with a received message, a deleted one and a purge-free state record
    sqs = json_client(own_gateway.endpoint)
    name = f"forget-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    taken = _receive(sqs, url, 2, 600)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=taken[0]["ReceiptHandle"])
    eventually(lambda: _changelog_caught_up(own_gateway), "the changelog caught up", 10)
    topics = AdminClient({"bootstrap.servers": own_gateway.bootstrap}).list_topics(timeout=10)
    [topic] = [t for t in topics.topics if t.startswith(f"kqs.000000000000.{name}.")]
    incarnation = topic.rsplit(".", 1)[1]
    assert any(
        v is not None for v in _changelog_latest(own_gateway.bootstrap, incarnation).values()
    )
    # When the queue is deleted
    sqs.delete_queue(QueueUrl=url)
    # Then every changelog key of that queue ends in a tombstone (published without waiting)
    deadline = time.monotonic() + 20
    while True:
        latest = _changelog_latest(own_gateway.bootstrap, incarnation)
        if all(v is None for v in latest.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert latest and all(v is None for v in latest.values()), latest


def test_a_rebuild_told_to_stop_ends_without_replaying(kafka_bootstrap: str) -> None:
    # Given a queue topic with a record to replay (and the changelog topic)
    topic = f"kqs-stop-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for name, future in admin.create_topics(
        [NewTopic(topic, 1, 1), NewTopic(LEASES_TOPIC, 1, 1)]
    ).items():
        try:
            future.result(timeout=30)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise AssertionError(f"{name}: {error}") from error
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    producer.produce(topic, b"a record the rebuild never reads")
    assert producer.flush(30) == 0
    kv = MemoryKeyValueStore()
    target = RebuildTarget(PartitionKey(b"s" * 16, 0), topic, 345_600_000)

    # When the rebuild runs with its stop already asked for (a shutdown)
    stop = threading.Event()
    stop.set()
    with pytest.raises(RebuildStopped):
        rebuild_leases(kafka_bootstrap, kv, [target], int(time.time() * 1000), stop=stop)

    # Then it replayed nothing into the store
    assert kv.scan(b"", b"\xff", limit=10) == []
