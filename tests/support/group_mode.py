"""Gateways sharing a queue's partitions (`KQS_PARTITION_OWNERSHIP=group`): which gateway serves
what, read from Kafka, and receiving through all of them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.support.harness import ACCOUNT_ID, GatewayProcess
from topology.names import OWNERS_TOPIC
from topology.owners import Owner, parse_owner_key

# The bound of every wait of the tests with several gateways.
BOUND_S = 30.0


def gateway_id(process: GatewayProcess) -> str:
    return (process.data_dir / "gateway-id").read_text().strip()


def owners_of(
    bootstrap: str, topic: str, login: Mapping[str, str] | None = None
) -> dict[int, Owner]:
    """The owners directory's latest entry for each partition of `topic` (`login`: the
    client's security settings on a secured cluster)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-owners",
            "enable.auto.commit": False,
            **(login or {}),
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(OWNERS_TOPIC, 0), timeout=10)
        found: dict[int, Owner] = {}
        if high <= 0:
            return found
        consumer.assign([TopicPartition(OWNERS_TOPIC, 0, OFFSET_BEGINNING)])
        position = -1
        while position < high - 1:
            msg = consumer.poll(10)
            assert msg is not None and not msg.error()
            position = msg.offset() or 0
            key, value = msg.key(), msg.value()
            assert isinstance(key, bytes)
            parsed = parse_owner_key(key)
            if parsed is not None and parsed[0] == topic and isinstance(value, bytes):
                found[parsed[1]] = Owner.decode(value)
        return found
    finally:
        consumer.close()


def topic_of(bootstrap: str, name: str, login: Mapping[str, str] | None = None) -> str:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test-topics", **(login or {})}
    )
    try:
        prefix = f"kqs.{ACCOUNT_ID}.{name}."
        topics: list[str] = list(consumer.list_topics(timeout=10).topics)
        (topic,) = [t for t in topics if t.startswith(prefix)]
        return topic
    finally:
        consumer.close()


def receive_all(clients: list[Any], url: str, expected: int) -> dict[str, list[str]]:
    """Receive through the clients in turn until `expected` distinct bodies arrived; body ->
    receipt handles (more than one would be a duplicate delivery)."""
    got: dict[str, list[str]] = {}
    deadline = time.monotonic() + BOUND_S
    turn = 0
    while len(got) < expected and time.monotonic() < deadline:
        answer = clients[turn % len(clients)].receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=120
        )
        for message in answer.get("Messages", []):
            got.setdefault(message["Body"], []).append(message["ReceiptHandle"])
        turn += 1
    return got
