"""The catalog is live on every gateway: two gateways on one broker, both protocols.

A queue created, changed, tagged or deleted through one gateway is seen through the other
within a bound (`SEEN_WITHIN_S`, polled), because every gateway follows `__kqs_queues`.
Messages are only received through one gateway here: until partitions have one owner each,
two gateways both ingest every partition (docs/ARCHITECTURE.md, "Several gateways").
"""

from __future__ import annotations

import threading
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import GatewayProcess, client_for
from tests.support.harness import eventually as harness_eventually

# The catalog follower fetches every 100 ms; the bound leaves room for a busy machine.
SEEN_WITHIN_S = 10.0

# Every wait of this module is bounded by SEEN_WITHIN_S.
eventually = partial(harness_eventually, timeout_s=SEEN_WITHIN_S)


@pytest.fixture(scope="module")
def other_gateway(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path_factory.mktemp("other-gateway"), kafka_bootstrap)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def via_a(gateway: GatewayProcess, protocol: str) -> Any:
    return client_for(protocol, gateway.endpoint)


@pytest.fixture
def via_b(other_gateway: GatewayProcess, protocol: str) -> Any:
    return client_for(protocol, other_gateway.endpoint)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def queue_url_or_none(sqs: Any, name: str) -> str | None:
    try:
        url: str = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        return url
    except ClientError as exc:
        if "NonExistentQueue" not in exc.response["Error"]["Code"]:
            raise
        return None


def gone(sqs: Any, name: str) -> bool | None:
    return True if queue_url_or_none(sqs, name) is None else None


def attribute(sqs: Any, url: str, name: str) -> str:
    value: str = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])["Attributes"][name]
    return value


def tags_of(sqs: Any, url: str) -> dict[str, str]:
    tags: dict[str, str] = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
    return tags


def test_a_queue_created_through_one_gateway_is_found_through_the_other(
    via_a: Any, via_b: Any
) -> None:
    # Given
    name = unique("live-create")
    # When
    url = via_a.create_queue(QueueName=name, Attributes={"DelaySeconds": "3"})["QueueUrl"]
    # Then
    url_b = eventually(lambda: queue_url_or_none(via_b, name), f"{name} through B")
    assert url_b.rsplit("/", 1)[1] == name
    assert attribute(via_b, url_b, "DelaySeconds") == "3"
    assert name in [
        u.rsplit("/", 1)[1] for u in via_b.list_queues(QueueNamePrefix=name)["QueueUrls"]
    ]
    assert attribute(via_b, url_b, "QueueArn") == attribute(via_a, url, "QueueArn")


def test_a_message_sent_through_the_other_gateway_lands_in_the_queue(
    via_a: Any, via_b: Any
) -> None:
    # Given: a queue created through A, known to B
    name = unique("live-send")
    url = via_a.create_queue(QueueName=name)["QueueUrl"]
    url_b = eventually(lambda: queue_url_or_none(via_b, name), f"{name} through B")
    # When: B produces to the queue's topic
    sent = via_b.send_message(QueueUrl=url_b, MessageBody="through B")

    # Then: A ingests B's record and delivers it
    def received() -> dict[str, Any] | None:
        messages = via_a.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
        return messages[0] if messages else None

    message = eventually(received, "B's message received through A")
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "through B"
    via_a.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_attributes_set_through_one_gateway_are_read_through_the_other(
    via_a: Any, via_b: Any
) -> None:
    # Given
    name = unique("live-attrs")
    url = via_a.create_queue(QueueName=name)["QueueUrl"]
    url_b = eventually(lambda: queue_url_or_none(via_b, name), f"{name} through B")
    # When
    via_a.set_queue_attributes(
        QueueUrl=url, Attributes={"VisibilityTimeout": "77", "MaximumMessageSize": "2048"}
    )
    # Then
    eventually(
        lambda: True if attribute(via_b, url_b, "VisibilityTimeout") == "77" else None,
        "VisibilityTimeout 77 through B",
    )
    assert attribute(via_b, url_b, "MaximumMessageSize") == "2048"
    assert attribute(via_b, url_b, "LastModifiedTimestamp") == attribute(
        via_a, url, "LastModifiedTimestamp"
    )


def test_tags_changed_through_one_gateway_are_listed_through_the_other(
    via_a: Any, via_b: Any
) -> None:
    # Given
    name = unique("live-tags")
    url = via_a.create_queue(QueueName=name)["QueueUrl"]
    url_b = eventually(lambda: queue_url_or_none(via_b, name), f"{name} through B")
    # When
    via_a.tag_queue(QueueUrl=url, Tags={"team": "payments", "tier": "1"})
    # Then
    eventually(
        lambda: True if tags_of(via_b, url_b) == {"team": "payments", "tier": "1"} else None,
        "tags through B",
    )
    # When: untagged through B
    via_b.untag_queue(QueueUrl=url_b, TagKeys=["tier"])
    # Then
    eventually(lambda: True if tags_of(via_a, url) == {"team": "payments"} else None, "untag")


def test_a_queue_deleted_through_one_gateway_is_gone_from_the_other(via_a: Any, via_b: Any) -> None:
    # Given
    name = unique("live-delete")
    url = via_a.create_queue(QueueName=name)["QueueUrl"]
    eventually(lambda: queue_url_or_none(via_b, name), f"{name} through B")
    # When
    via_a.delete_queue(QueueUrl=url)
    # Then: gone, and remembered as deleted recently
    eventually(lambda: gone(via_b, name), f"{name} gone from B")
    with pytest.raises(ClientError) as excinfo:
        via_b.create_queue(QueueName=name)
    assert excinfo.value.response["Error"]["Code"] in (
        "QueueDeletedRecently",
        "AWS.SimpleQueueService.QueueDeletedRecently",
    )


def parked(gateway: GatewayProcess) -> int:
    """Receives parked on the gateway now (its `kqs_long_polls_parked` gauge)."""
    with urllib.request.urlopen(f"{gateway.endpoint}/metrics", timeout=5) as response:
        text = response.read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("kqs_long_polls_parked ")]
    return int(float(line.split()[1]))


def test_a_long_poll_parked_on_the_other_gateway_ends_when_the_queue_is_deleted(
    via_a: Any, via_b: Any, other_gateway: GatewayProcess
) -> None:
    # Given: a 20 s long poll through B on an empty queue
    name = unique("live-park")
    url = via_a.create_queue(QueueName=name)["QueueUrl"]
    url_b = eventually(lambda: queue_url_or_none(via_b, name), f"{name} through B")
    outcome: list[Any] = []

    def long_poll() -> None:
        try:
            outcome.append(via_b.receive_message(QueueUrl=url_b, WaitTimeSeconds=20))
        except ClientError as exc:
            outcome.append(exc)

    poller = threading.Thread(target=long_poll)
    poller.start()
    try:
        eventually(lambda: True if parked(other_gateway) else None, "the receive parked on B")
        # When: deleted through A
        via_a.delete_queue(QueueUrl=url)
        # Then: B answers the parked receive (empty) long before its 20 s are up
        poller.join(timeout=SEEN_WITHIN_S)
        assert not poller.is_alive(), "the parked receive did not end with its queue"
    finally:
        poller.join()
    (answer,) = outcome
    assert not isinstance(answer, ClientError) and answer.get("Messages", []) == []
