"""A single gateway started beside group-mode gateways says so (`gateway/cluster/group_check.py`).

A group-mode gateway is a live member of the ingest consumer group; here a real consumer
subscribed under that group stands for one, on a broker of the module's own (the session's
single gateway must not meet it).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.support.harness import GatewayProcess, eventually
from topology.admin import TopicAdmin
from topology.names import INGEST_GROUP

WARNING = "group-mode gateways already serve this cluster's queues"


@pytest.fixture(scope="module")
def kafka_bootstrap(own_kafka_bootstrap: str) -> str:
    return own_kafka_bootstrap


@pytest.fixture
def group_member(kafka_bootstrap: str) -> Iterator[str]:
    """A consumer holding a partition as a member of the ingest group; yields its client id."""
    topic = f"group-check-{uuid.uuid4().hex[:8]}"
    asyncio.run(TopicAdmin(kafka_bootstrap).create_topic(topic, 1, {}))
    client_id = f"member-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": INGEST_GROUP,
            "client.id": client_id,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])

    def joined() -> bool | None:
        consumer.poll(0.1)
        return True if consumer.assignment() else None

    try:
        eventually(joined, "the consumer's partition assignment", timeout_s=30)
        yield client_id
    finally:
        consumer.close()  # leaves the group at once


def members(bootstrap: str) -> list[str]:
    return asyncio.run(TopicAdmin(bootstrap).group_members(INGEST_GROUP))


def warnings_in(log_path: Path) -> list[dict[str, object]]:
    lines = log_path.read_text(errors="replace").splitlines()
    entries = [json.loads(line) for line in lines if line.startswith("{")]
    return [entry for entry in entries if WARNING in str(entry.get("msg", ""))]


def test_the_live_members_of_the_ingest_group_are_listed(
    kafka_bootstrap: str, group_member: str
) -> None:
    assert [m for m in members(kafka_bootstrap) if m.startswith(f"{group_member}@")]


def test_an_unknown_group_has_no_members(kafka_bootstrap: str) -> None:
    admin = TopicAdmin(kafka_bootstrap)
    assert asyncio.run(admin.group_members(f"no-such-group-{uuid.uuid4().hex}")) == []


def test_a_single_gateway_beside_group_members_warns_naming_them(
    kafka_bootstrap: str, group_member: str, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path / "single", kafka_bootstrap, env={"KQS_LOG_FORMAT": "json"})
    gateway.start()
    try:
        found = warnings_in(gateway.log_path)
    finally:
        gateway.stop()
    assert len(found) == 1, gateway.log_tail()
    assert found[0]["level"] == "warning"
    named = found[0]["members"]
    assert isinstance(named, list)
    assert [m for m in named if str(m).startswith(f"{group_member}@")]


def test_a_single_gateway_alone_on_its_cluster_does_not_warn(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # The members of the tests above left when they closed (a LeaveGroup each).
    eventually(lambda: True if not members(kafka_bootstrap) else None, "an empty group", 10)
    gateway = GatewayProcess(tmp_path / "alone", kafka_bootstrap, env={"KQS_LOG_FORMAT": "json"})
    gateway.start()
    gateway.stop()
    assert warnings_in(gateway.log_path) == []
    assert "listening" in gateway.log_path.read_text()
