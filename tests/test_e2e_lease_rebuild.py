"""A gateway whose lease store is lost or corrupt rebuilds it from `__kqs_leases` + the log."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import GatewayProcess, json_client


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
