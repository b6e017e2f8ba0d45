"""A queue is an ordinary Kafka topic: Kafka clients read SQS messages and can write them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.harness import ACCOUNT_ID
from topology.names import INGEST_GROUP


def _topic_of(bootstrap: str, queue_name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    prefix = f"kqs.{ACCOUNT_ID}.{queue_name}."
    # A just-created topic reaches the broker's metadata a moment after CreateTopics returns.
    deadline = time.monotonic() + 10
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    while not topics and time.monotonic() < deadline:
        time.sleep(0.1)
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    assert len(topics) == 1, topics
    return topics[0]


def test_kafka_consumer_reads_the_message_body_as_the_record_value(
    sqs: Any, new_queue: Callable[..., str], kafka_bootstrap: str
) -> None:
    # Given a message sent through SQS with an attribute
    url = new_queue("native-read")
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="hello kafka",
        MessageAttributes={"colour": {"DataType": "String", "StringValue": "blue"}},
    )
    # When a plain Kafka consumer reads the queue's topic
    topic = _topic_of(kafka_bootstrap, url.rsplit("/", 1)[1])
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"t-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        record = consumer.poll(10)
    finally:
        consumer.close()
    # Then the value is the body, the key the message id, and attributes travel as headers
    assert record is not None and record.error() is None
    assert record.value() == b"hello kafka"
    assert record.key() == sent["MessageId"].encode()
    headers = dict(record.headers() or [])
    assert headers["sqs.attr.colour"] == b'{"DataType": "String", "StringValue": "blue"}'


def test_record_produced_by_kafka_client_is_received_through_sqs(
    sqs: Any, new_queue: Callable[..., str], kafka_bootstrap: str
) -> None:
    # Given a record written straight to the queue's topic, without SQS headers or key
    url = new_queue("native-write")
    topic = _topic_of(kafka_bootstrap, url.rsplit("/", 1)[1])
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    producer.produce(topic, value=b"from a kafka producer")
    assert producer.flush(10) == 0
    # When an SQS client receives
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    # Then it gets the record as a message with a stable id
    assert [m["Body"] for m in messages] == ["from a kafka producer"]
    assert uuid.UUID(messages[0]["MessageId"])


def _committed_offset(bootstrap: str, topic: str) -> int | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(INGEST_GROUP, [TopicPartition(topic, 0)])
    result = admin.list_consumer_group_offsets([request])[INGEST_GROUP].result(timeout=10)
    offset = result.topic_partitions[0].offset
    return int(offset) if offset >= 0 else None


def test_committed_group_offset_is_the_lowest_undeleted_message(
    sqs: Any, new_queue: Callable[..., str], kafka_bootstrap: str
) -> None:
    # Given three messages of which the first two are deleted
    url = new_queue("lag")
    for body in ("one", "two", "three"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(received) == 3
    for message in received:
        if message["Body"] != "three":
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # When the gateway publishes its offsets (every 0.5 s in tests)
    topic = _topic_of(kafka_bootstrap, url.rsplit("/", 1)[1])
    deadline = time.monotonic() + 15
    committed = _committed_offset(kafka_bootstrap, topic)
    while committed != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        committed = _committed_offset(kafka_bootstrap, topic)
    # Then Kafka tools see a backlog (lag) of exactly the one undeleted message
    assert committed == 2
