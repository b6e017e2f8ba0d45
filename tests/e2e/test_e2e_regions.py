"""Regions end to end, through both protocols: a queue belongs to an account and a region.

The region is the one the request is signed for (the SigV4 credential scope); queue URLs do
not carry it. The same name in us-east-1 (the gateway's default) and eu-west-1 is two queues.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from confluent_kafka.admin import AdminClient

from tests.support.harness import ACCOUNT_ID, REGION, GatewayProcess, client_for, signed_headers

AWAY = "eu-west-1"


@pytest.fixture
def home(gateway: GatewayProcess, protocol: str) -> Any:
    """A client signing for the gateway's default region, us-east-1."""
    assert REGION == "us-east-1"
    return client_for(protocol, gateway.endpoint, region=REGION)


@pytest.fixture
def away(gateway: GatewayProcess, protocol: str) -> Any:
    """A client of the same account signing for eu-west-1."""
    return client_for(protocol, gateway.endpoint, region=AWAY)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def arn_of(client: Any, url: str) -> str:
    attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    arn: str = attributes["Attributes"]["QueueArn"]
    return arn


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error.get("Message", "")


def bodies(client: Any, url: str) -> list[str]:
    messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return sorted(m["Body"] for m in messages)


def test_the_same_name_in_two_regions_is_two_queues_with_their_own_messages(
    home: Any, away: Any
) -> None:
    # Given "orders-…" created in us-east-1 and in eu-west-1
    name = unique("orders")
    home_url = home.create_queue(QueueName=name)["QueueUrl"]
    away_url = away.create_queue(QueueName=name)["QueueUrl"]
    # When each region's queue gets a message
    home.send_message(QueueUrl=home_url, MessageBody="from us-east-1")
    away.send_message(QueueUrl=away_url, MessageBody="from eu-west-1")
    # Then the URLs are alike (the region is the signature's), the queues are not
    assert home_url == away_url
    assert home_url.endswith(f"/{ACCOUNT_ID}/{name}")
    assert arn_of(home, home_url) == f"arn:aws:sqs:us-east-1:{ACCOUNT_ID}:{name}"
    assert arn_of(away, away_url) == f"arn:aws:sqs:{AWAY}:{ACCOUNT_ID}:{name}"
    assert bodies(home, home_url) == ["from us-east-1"]
    assert bodies(away, away_url) == ["from eu-west-1"]
    # And deleting one leaves the other
    away.delete_queue(QueueUrl=away_url)
    assert home.get_queue_url(QueueName=name)["QueueUrl"] == home_url


def test_list_queues_and_get_queue_url_answer_for_the_request_region(home: Any, away: Any) -> None:
    # Given one queue in each region
    prefix = unique("listed")
    home_url = home.create_queue(QueueName=f"{prefix}-home")["QueueUrl"]
    away_url = away.create_queue(QueueName=f"{prefix}-away")["QueueUrl"]
    # Then each region lists and finds only its own
    assert home.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == [home_url]
    assert away.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == [away_url]
    assert away.get_queue_url(QueueName=f"{prefix}-away")["QueueUrl"] == away_url
    with pytest.raises(ClientError) as excinfo:
        home.get_queue_url(QueueName=f"{prefix}-away")
    assert error_of(excinfo)[0] == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_queue_url_used_with_a_signature_of_another_region_is_not_that_queue(
    home: Any, away: Any
) -> None:
    # Given a queue in eu-west-1 only
    url = away.create_queue(QueueName=unique("only-away"))["QueueUrl"]
    # When a request signed for us-east-1 names its URL
    with pytest.raises(ClientError) as excinfo:
        home.send_message(QueueUrl=url, MessageBody="lost?")
    # Then there is no such queue in us-east-1, and nothing reached the eu-west-1 queue
    assert error_of(excinfo)[0] == "AWS.SimpleQueueService.NonExistentQueue"
    assert bodies(away, url) == []


def test_a_dead_letter_queue_of_another_region_is_refused(home: Any, away: Any) -> None:
    # Given a DLQ in eu-west-1
    dlq_url = away.create_queue(QueueName=unique("dlq"))["QueueUrl"]
    redrive = {"deadLetterTargetArn": arn_of(away, dlq_url), "maxReceiveCount": 1}
    policy = json.dumps(redrive, separators=(",", ":"))  # as the gateway quotes it
    # When a us-east-1 queue names it, at creation or later
    with pytest.raises(ClientError) as created:
        home.create_queue(QueueName=unique("src"), Attributes={"RedrivePolicy": policy})
    url = home.create_queue(QueueName=unique("src"))["QueueUrl"]
    with pytest.raises(ClientError) as set_later:
        home.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    # Then both are refused as AWS refuses a DLQ outside the source's region
    for excinfo in (created, set_later):
        code, message = error_of(excinfo)
        assert code == "InvalidParameterValue"
        assert message == (
            f"Value {policy} for parameter RedrivePolicy is invalid. Reason: Dead-letter "
            "target must be in same region as the source."
        )


def test_a_dead_letter_move_in_another_region_names_the_source_in_that_region(
    away: Any,
) -> None:
    # Given a eu-west-1 queue whose DLQ (eu-west-1) takes a message after one receive
    dlq_url = away.create_queue(QueueName=unique("dlq"))["QueueUrl"]
    redrive = {"deadLetterTargetArn": arn_of(away, dlq_url), "maxReceiveCount": 1}
    url = away.create_queue(
        QueueName=unique("src"),
        Attributes={"RedrivePolicy": json.dumps(redrive), "VisibilityTimeout": "0"},
    )["QueueUrl"]
    away.send_message(QueueUrl=url, MessageBody="poison")
    # When it is received twice
    assert bodies(away, url) == ["poison"]
    assert bodies(away, url) == []
    # Then it is in the DLQ, its source ARN of eu-west-1, and the DLQ lists its source
    [moved] = away.receive_message(QueueUrl=dlq_url, AttributeNames=["All"])["Messages"]
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == arn_of(away, url)
    assert arn_of(away, url).startswith(f"arn:aws:sqs:{AWAY}:")
    assert away.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [url]


def test_queue_topics_carry_the_region_except_in_the_default_region(
    home: Any, away: Any, kafka_bootstrap: str
) -> None:
    # Given the same name in both regions
    name = unique("topics")
    home.create_queue(QueueName=name)
    away.create_queue(QueueName=name)
    # Then each has a topic of its own: the default region's without the region
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    ours = sorted(t.rsplit(".", 1)[0] for t in topics if f".{name}." in t)
    assert ours == [f"kqs.{ACCOUNT_ID}.{name}", f"kqs.{AWAY}.{ACCOUNT_ID}.{name}"]


def test_a_request_signed_for_a_region_that_cannot_be_one_is_refused(
    gateway: GatewayProcess,
) -> None:
    # When a request is signed for "EU_WEST_1" (not a region name)
    body = b"Action=ListQueues&Version=2012-11-05"
    headers = signed_headers(
        f"{gateway.endpoint}/",
        body,
        {"Content-Type": "application/x-www-form-urlencoded"},
        region="EU_WEST_1",
    )
    request = urllib.request.Request(f"{gateway.endpoint}/", body, headers, method="POST")
    # Then it is refused as a bad signature, before any queue is looked at
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request, timeout=10)
    assert excinfo.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in excinfo.value.read()
