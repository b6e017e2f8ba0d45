"""The queue control plane end to end, through both protocols, on real Kafka.

GetQueueAttributes, SetQueueAttributes, tags, ListDeadLetterSourceQueues, PurgeQueue, and
the errors CreateQueue, GetQueueUrl and ListQueues answer with, as SQS answers them.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
    OffsetSpec,
)

from gateway.common import limits
from tests.support.harness import ACCOUNT_ID, REGION, NewQueue


def error_code(excinfo: pytest.ExceptionInfo[ClientError]) -> str:
    code: str = excinfo.value.response["Error"]["Code"]
    return code


def error_message(excinfo: pytest.ExceptionInfo[ClientError]) -> str:
    message: str = excinfo.value.response["Error"]["Message"]
    return message


def http_status(excinfo: pytest.ExceptionInfo[ClientError]) -> int:
    status: int = excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]
    return status


def name_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


def arn_of(url: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name_of(url)}"


def attributes_of(sqs: Any, url: str, *names: str) -> dict[str, str]:
    attributes: dict[str, str] = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=list(names) or ["All"]
    ).get("Attributes", {})
    return attributes


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def queue_topic_of(admin: AdminClient, url: str) -> str:
    prefix = f"kqs.{ACCOUNT_ID}.{name_of(url)}."
    (topic,) = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    return topic


# -- GetQueueAttributes ----------------------------------------------------------------------


def test_get_all_attributes_of_a_new_queue_gives_defaults_identity_and_zero_counts(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given
    before_s = int(time.time())
    url = new_queue("attrs")
    # When
    attributes = attributes_of(sqs, url, "All")
    # Then
    assert attributes == {
        "QueueArn": arn_of(url),
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
        "ApproximateNumberOfMessagesDelayed": "0",
        "CreatedTimestamp": attributes["CreatedTimestamp"],
        "LastModifiedTimestamp": attributes["LastModifiedTimestamp"],
        "VisibilityTimeout": "30",
        "MaximumMessageSize": "1048576",
        "MessageRetentionPeriod": "345600",
        "DelaySeconds": "0",
        "ReceiveMessageWaitTimeSeconds": "0",
        # SQS's default is true; the session's gateway has no master key, so its queues are
        # not encrypted and say so (a keyed gateway: tests/e2e/test_e2e_encryption_at_rest.py).
        "SqsManagedSseEnabled": "false",
    }
    # And the timestamps are in seconds
    assert before_s - 1 <= int(attributes["CreatedTimestamp"]) <= int(time.time()) + 1
    assert attributes["LastModifiedTimestamp"] == attributes["CreatedTimestamp"]


def test_get_queue_attributes_without_names_returns_no_attributes(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given
    url = new_queue("noattrs")
    # When
    response = sqs.get_queue_attributes(QueueUrl=url)
    # Then
    assert "Attributes" not in response


def test_get_queue_attributes_returns_only_the_named_attributes(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("named", VisibilityTimeout="45")
    assert attributes_of(sqs, url, "VisibilityTimeout", "QueueArn") == {
        "VisibilityTimeout": "45",
        "QueueArn": arn_of(url),
    }


def test_get_queue_attributes_with_an_unknown_name_is_refused(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given
    url = new_queue("unknownattr")
    # When
    with pytest.raises(ClientError) as excinfo:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "Colour"])
    # Then
    assert error_code(excinfo) == "InvalidAttributeName"
    assert error_message(excinfo) == "Unknown Attribute Colour."
    assert http_status(excinfo) == 400


def test_get_queue_attributes_of_a_missing_queue_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.get_queue_attributes(QueueUrl=unique("absent"), AttributeNames=["All"])
    assert error_code(excinfo) == "AWS.SimpleQueueService.NonExistentQueue"
    assert http_status(excinfo) == 400


def test_message_counters_count_visible_in_flight_and_delayed_messages(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given two visible messages and one delayed
    url = new_queue("counts")
    sqs.send_message(QueueUrl=url, MessageBody="one")
    sqs.send_message(QueueUrl=url, MessageBody="two")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=900)
    # When one is received
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]) == 1
    # Then
    counters = attributes_of(
        sqs,
        url,
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    )
    assert counters == {
        "ApproximateNumberOfMessages": "1",
        "ApproximateNumberOfMessagesNotVisible": "1",
        "ApproximateNumberOfMessagesDelayed": "1",
    }


# -- SetQueueAttributes ----------------------------------------------------------------------


def test_set_queue_attributes_changes_what_get_queue_attributes_returns(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given
    url = new_queue("set")
    # When
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "VisibilityTimeout": "60",
            "DelaySeconds": "5",
            "ReceiveMessageWaitTimeSeconds": "2",
            "MaximumMessageSize": "2048",
            "SqsManagedSseEnabled": "FALSE",
        },
    )
    # Then
    attributes = attributes_of(sqs, url)
    assert attributes["VisibilityTimeout"] == "60"
    assert attributes["DelaySeconds"] == "5"
    assert attributes["ReceiveMessageWaitTimeSeconds"] == "2"
    assert attributes["MaximumMessageSize"] == "2048"
    assert attributes["SqsManagedSseEnabled"] == "false"
    assert int(attributes["LastModifiedTimestamp"]) >= int(attributes["CreatedTimestamp"])


def test_changed_retention_period_sets_the_queue_topic_retention(
    sqs: Any, new_queue: NewQueue, kafka_bootstrap: str
) -> None:
    # Given
    url = new_queue("retention")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    # When
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "120"})
    # Then
    assert attributes_of(sqs, url, "MessageRetentionPeriod") == {"MessageRetentionPeriod": "120"}
    resource = ConfigResource("topic", queue_topic_of(admin, url))
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["retention.ms"].value == str(120_000 + limits.RETENTION_MARGIN_MS)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VisibilityTimeout", "43201"),
        ("VisibilityTimeout", "-1"),
        ("DelaySeconds", "901"),
        ("MessageRetentionPeriod", "59"),
        ("MessageRetentionPeriod", "1209601"),
        ("MaximumMessageSize", "1023"),
        ("MaximumMessageSize", "1048577"),
        ("ReceiveMessageWaitTimeSeconds", "21"),
        ("VisibilityTimeout", "ten"),
        ("Policy", "not json"),
    ],
)
def test_set_queue_attributes_with_an_invalid_value_is_refused(
    sqs: Any, new_queue: NewQueue, name: str, value: str
) -> None:
    # Given
    url = new_queue("badvalue")
    # When
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})
    # Then
    assert error_code(excinfo) == "InvalidAttributeValue"
    assert http_status(excinfo) == 400
    assert attributes_of(sqs, url, name).get(name) != value


def test_set_queue_attributes_with_an_unknown_name_is_refused(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("badname")
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Colour": "blue"})
    assert error_code(excinfo) == "InvalidAttributeName"
    assert error_message(excinfo) == "Unknown Attribute Colour."
    assert http_status(excinfo) == 400


def test_policy_is_returned_only_while_set(sqs: Any, new_queue: NewQueue) -> None:
    # Given a queue with a Policy
    url = new_queue("policy")
    policy = json.dumps({"Version": "2012-10-17", "Statement": []})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})
    assert attributes_of(sqs, url)["Policy"] == policy
    # When the Policy is set to an empty string
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    # Then it is gone
    assert "Policy" not in attributes_of(sqs, url)


def test_redrive_policy_is_returned_with_max_receive_count_as_a_number(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given
    dlq = new_queue("dlq")
    source = new_queue("source")
    # When maxReceiveCount is sent as a string, as the AWS guides show it
    policy = json.dumps({"maxReceiveCount": "5", "deadLetterTargetArn": arn_of(dlq)})
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    # Then
    returned = attributes_of(sqs, source, "RedrivePolicy")["RedrivePolicy"]
    assert json.loads(returned) == {"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 5}


def test_empty_redrive_policy_removes_it(sqs: Any, new_queue: NewQueue) -> None:
    # Given
    dlq = new_queue("dlq")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 3})
    source = new_queue("source", RedrivePolicy=policy)
    # When
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    # Then
    assert "RedrivePolicy" not in attributes_of(sqs, source)
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq).get("queueUrls", []) == []


def test_redrive_policy_naming_a_missing_queue_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    # Given
    source = new_queue("source")
    missing = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{unique('nodlq')}"
    policy = json.dumps({"deadLetterTargetArn": missing, "maxReceiveCount": 3})
    # When
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    # Then
    assert error_code(excinfo) == "InvalidParameterValue"
    assert http_status(excinfo) == 400


@pytest.mark.parametrize("count", [0, 1001, "0", "many", None])
def test_redrive_policy_with_max_receive_count_outside_1_to_1000_is_refused(
    sqs: Any, new_queue: NewQueue, count: object
) -> None:
    # Given
    dlq = new_queue("dlq")
    source = new_queue("source")
    policy = {"deadLetterTargetArn": arn_of(dlq)}
    if count is not None:
        policy["maxReceiveCount"] = count  # type: ignore[assignment]
    # When
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": json.dumps(policy)})
    # Then
    assert error_code(excinfo) == "InvalidParameterValue"
    assert "RedrivePolicy" not in attributes_of(sqs, source)


@pytest.mark.parametrize("count", [1, "1000"])
def test_redrive_policy_accepts_max_receive_count_at_the_limits(
    sqs: Any, new_queue: NewQueue, count: object
) -> None:
    dlq = new_queue("dlq")
    source = new_queue("source")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": count})
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    returned = json.loads(attributes_of(sqs, source, "RedrivePolicy")["RedrivePolicy"])
    assert returned["maxReceiveCount"] == int(str(count))


def test_redrive_allow_policy_by_queue_is_stored(sqs: Any, new_queue: NewQueue) -> None:
    # Given
    dlq = new_queue("dlq")
    source = new_queue("source")
    policy = json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [arn_of(source)]})
    # When
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": policy})
    # Then
    assert attributes_of(sqs, dlq, "RedriveAllowPolicy") == {"RedriveAllowPolicy": policy}


@pytest.mark.parametrize(
    "policy",
    [
        {"redrivePermission": "byQueue"},
        {"redrivePermission": "byQueue", "sourceQueueArns": []},
        {
            "redrivePermission": "byQueue",
            "sourceQueueArns": [f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:q{i}" for i in range(11)],
        },
        {"redrivePermission": "sometimes"},
        {"redrivePermission": "allowAll", "sourceQueueArns": ["arn:aws:sqs:us-east-1:1:q"]},
        {},
    ],
)
def test_invalid_redrive_allow_policy_is_refused(
    sqs: Any, new_queue: NewQueue, policy: dict[str, Any]
) -> None:
    # Given
    dlq = new_queue("dlq")
    # When
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(
            QueueUrl=dlq, Attributes={"RedriveAllowPolicy": json.dumps(policy)}
        )
    # Then
    assert error_code(excinfo) == "InvalidParameterValue"
    assert http_status(excinfo) == 400
    assert "RedriveAllowPolicy" not in attributes_of(sqs, dlq)


def test_set_queue_attributes_of_a_missing_queue_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=unique("absent"), Attributes={"DelaySeconds": "1"})
    assert error_code(excinfo) == "AWS.SimpleQueueService.NonExistentQueue"


# -- tags ------------------------------------------------------------------------------------


def test_untagged_queue_lists_no_tags(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("untagged")
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_tags_given_at_creation_are_listed(sqs: Any) -> None:
    # Given
    url = sqs.create_queue(QueueName=unique("tagged"), tags={"team": "orders", "env": "test"})[
        "QueueUrl"
    ]
    # When
    tags = sqs.list_queue_tags(QueueUrl=url)["Tags"]
    # Then
    assert tags == {"team": "orders", "env": "test"}


def test_tag_queue_adds_and_overwrites_and_untag_queue_removes(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given
    url = new_queue("tags")
    sqs.tag_queue(QueueUrl=url, Tags={"team": "orders", "env": "test"})
    # When
    sqs.tag_queue(QueueUrl=url, Tags={"env": "prod", "cost-centre": "42"})
    # Then
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {
        "team": "orders",
        "env": "prod",
        "cost-centre": "42",
    }
    # When two keys are removed, one of which the queue does not have
    sqs.untag_queue(QueueUrl=url, TagKeys=["team", "no-such-key"])
    # Then
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "prod", "cost-centre": "42"}


def test_tag_queue_beyond_fifty_tags_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    # Given a queue with the most tags it may have
    url = new_queue("manytags")
    sqs.tag_queue(QueueUrl=url, Tags={f"k{i}": "v" for i in range(limits.MAX_TAGS)})
    # When one more is added
    with pytest.raises(ClientError) as excinfo:
        sqs.tag_queue(QueueUrl=url, Tags={"one-too-many": "v"})
    # Then
    assert error_code(excinfo) == "InvalidParameterValue"
    assert http_status(excinfo) == 400
    assert len(sqs.list_queue_tags(QueueUrl=url)["Tags"]) == limits.MAX_TAGS


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("k" * 128, "v" * 256, True),
        ("k" * 129, "v", False),
        ("k", "v" * 257, False),
    ],
)
def test_tag_key_and_value_lengths_are_limited(
    sqs: Any, new_queue: NewQueue, key: str, value: str, accepted: bool
) -> None:
    url = new_queue("taglen")
    if accepted:
        sqs.tag_queue(QueueUrl=url, Tags={key: value})
        assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {key: value}
        return
    with pytest.raises(ClientError) as excinfo:
        sqs.tag_queue(QueueUrl=url, Tags={key: value})
    assert error_code(excinfo) == "InvalidParameterValue"


def test_tag_queue_of_a_missing_queue_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.tag_queue(QueueUrl=unique("absent"), Tags={"a": "b"})
    assert error_code(excinfo) == "AWS.SimpleQueueService.NonExistentQueue"


# -- ListDeadLetterSourceQueues --------------------------------------------------------------


def _redrive_to(dlq_url: str) -> str:
    return json.dumps({"deadLetterTargetArn": arn_of(dlq_url), "maxReceiveCount": 3})


def test_dead_letter_source_queues_are_the_queues_redriving_to_it(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given two sources of one DLQ, and a queue redriving elsewhere
    dlq = new_queue("dlq")
    other_dlq = new_queue("otherdlq")
    sources = sorted(new_queue("src", RedrivePolicy=_redrive_to(dlq)) for _ in range(2))
    new_queue("elsewhere", RedrivePolicy=_redrive_to(other_dlq))
    # When
    response = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    # Then
    assert response["queueUrls"] == sources
    assert "NextToken" not in response


def test_dead_letter_source_queues_come_in_pages(sqs: Any, new_queue: NewQueue) -> None:
    # Given three sources
    dlq = new_queue("dlq")
    sources = sorted(new_queue("src", RedrivePolicy=_redrive_to(dlq)) for _ in range(3))
    # When pages of two are followed
    first = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2)
    second = sqs.list_dead_letter_source_queues(
        QueueUrl=dlq, MaxResults=2, NextToken=first["NextToken"]
    )
    # Then
    assert first["queueUrls"] == sources[:2]
    assert second["queueUrls"] == sources[2:]
    assert "NextToken" not in second


def test_queue_without_sources_lists_none(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("lonely")
    assert sqs.list_dead_letter_source_queues(QueueUrl=url).get("queueUrls", []) == []


@pytest.mark.parametrize("max_results", [0, 1001])
def test_dead_letter_source_queues_max_results_outside_1_to_1000_is_refused(
    sqs: Any, new_queue: NewQueue, max_results: int
) -> None:
    url = new_queue("dlq")
    with pytest.raises(ClientError) as excinfo:
        sqs.list_dead_letter_source_queues(QueueUrl=url, MaxResults=max_results)
    assert error_code(excinfo) == "InvalidParameterValue"
    assert http_status(excinfo) == 400


# -- PurgeQueue ------------------------------------------------------------------------------


def test_purge_queue_deletes_visible_in_flight_and_delayed_messages(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a visible, an in-flight and a delayed message
    url = new_queue("purge")
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=900)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=1)
    # When
    sqs.purge_queue(QueueUrl=url)
    # Then nothing is left, not even once the lease has ended
    counters = attributes_of(
        sqs,
        url,
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    )
    assert set(counters.values()) == {"0"}
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)


def test_messages_sent_after_a_purge_are_kept(sqs: Any, new_queue: NewQueue) -> None:
    # Given a purged queue
    url = new_queue("afterpurge")
    sqs.send_message(QueueUrl=url, MessageBody="before")
    sqs.purge_queue(QueueUrl=url)
    # When
    sqs.send_message(QueueUrl=url, MessageBody="after")
    # Then
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert [m["Body"] for m in messages["Messages"]] == ["after"]


def test_purge_deletes_the_records_from_kafka(
    sqs: Any, new_queue: NewQueue, kafka_bootstrap: str
) -> None:
    # Given
    url = new_queue("purgekafka")
    for i in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=str(i))
    # When
    sqs.purge_queue(QueueUrl=url)
    # Then every partition's log starts at its end
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = queue_topic_of(admin, url)
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    starts = _offsets(admin, topic, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
    ends = _offsets(admin, topic, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
    assert starts == ends
    assert sum(ends.values()) == 5


def _offsets(admin: AdminClient, topic: str, partitions: Any, spec: Any) -> dict[int, int]:
    futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions})
    return {tp.partition: int(f.result(timeout=10).offset) for tp, f in futures.items()}


def test_purge_twice_within_a_minute_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    # Given a queue purged just now
    url = new_queue("purgetwice")
    sqs.purge_queue(QueueUrl=url)
    # When it is purged again
    with pytest.raises(ClientError) as excinfo:
        sqs.purge_queue(QueueUrl=url)
    # Then
    assert error_code(excinfo) == "AWS.SimpleQueueService.PurgeQueueInProgress"
    assert http_status(excinfo) == 403
    assert error_message(excinfo) == (
        f"Only one PurgeQueue operation on {name_of(url)} is allowed every 60 seconds."
    )


def test_purge_of_a_missing_queue_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.purge_queue(QueueUrl=unique("absent"))
    assert error_code(excinfo) == "AWS.SimpleQueueService.NonExistentQueue"


# -- CreateQueue errors ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["has space", "dots.in.name", "x" * 81, "ünïcode"])
def test_create_queue_with_an_invalid_name_is_refused(sqs: Any, name: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name)
    assert error_code(excinfo) == "InvalidParameterValue"
    assert http_status(excinfo) == 400


def test_create_queue_accepts_a_name_of_80_characters(sqs: Any) -> None:
    name = unique("long").ljust(80, "x")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert name_of(url) == name


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VisibilityTimeout", "43201"),
        ("DelaySeconds", "-1"),
        ("MaximumMessageSize", "1023"),
        ("MessageRetentionPeriod", "1209601"),
        ("ReceiveMessageWaitTimeSeconds", "x"),
    ],
)
def test_create_queue_with_an_invalid_attribute_value_is_refused(
    sqs: Any, name: str, value: str
) -> None:
    # Given
    queue_name = unique("badattr")
    # When
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=queue_name, Attributes={name: value})
    # Then
    assert error_code(excinfo) == "InvalidAttributeValue"
    assert http_status(excinfo) == 400
    with pytest.raises(ClientError):
        sqs.get_queue_url(QueueName=queue_name)


def test_create_queue_with_an_unknown_attribute_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=unique("unknown"), Attributes={"Colour": "blue"})
    assert error_code(excinfo) == "InvalidAttributeName"
    assert error_message(excinfo) == "Unknown Attribute Colour."
    assert http_status(excinfo) == 400


def test_create_queue_with_an_invalid_redrive_allow_policy_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(
            QueueName=unique("dlq"),
            Attributes={"RedriveAllowPolicy": json.dumps({"redrivePermission": "byQueue"})},
        )
    assert error_code(excinfo) == "InvalidParameterValue"


def test_recreating_a_queue_within_a_minute_of_deleting_it_is_refused(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue deleted just now
    url = new_queue("recreate")
    sqs.delete_queue(QueueUrl=url)
    # When it is created again
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name_of(url))
    # Then
    assert error_code(excinfo) == "AWS.SimpleQueueService.QueueDeletedRecently"
    assert http_status(excinfo) == 400


def test_create_queue_with_a_redrive_policy_string_count_is_idempotent(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue created with maxReceiveCount as a string
    dlq = new_queue("dlq")
    name = unique("src")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": "4"})
    first = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    # When it is created again with the same attributes
    second = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    # Then
    assert first == second


# -- GetQueueUrl and ListQueues --------------------------------------------------------------


def test_get_queue_url_with_the_owner_account_finds_the_queue(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("owner")
    found = sqs.get_queue_url(QueueName=name_of(url), QueueOwnerAWSAccountId=ACCOUNT_ID)
    assert found["QueueUrl"] == url


def test_get_queue_url_with_another_owner_account_does_not_find_the_queue(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("owner")
    with pytest.raises(ClientError) as excinfo:
        sqs.get_queue_url(QueueName=name_of(url), QueueOwnerAWSAccountId="111122223333")
    assert error_code(excinfo) == "AWS.SimpleQueueService.NonExistentQueue"
    assert http_status(excinfo) == 400


def test_list_queues_comes_in_pages_of_max_results(sqs: Any) -> None:
    # Given five queues with a common prefix
    prefix = unique("page")
    urls = sorted(sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(5))
    # When pages of two are followed to the end
    pages: list[list[str]] = []
    request: dict[str, Any] = {"QueueNamePrefix": prefix, "MaxResults": 2}
    while True:
        response = sqs.list_queues(**request)
        pages.append(response["QueueUrls"])
        if "NextToken" not in response:
            break
        request["NextToken"] = response["NextToken"]
    # Then
    assert pages == [urls[0:2], urls[2:4], urls[4:5]]


def test_list_queues_without_max_results_gives_no_next_token(sqs: Any) -> None:
    prefix = unique("nopage")
    for i in range(3):
        sqs.create_queue(QueueName=f"{prefix}-{i}")
    response = sqs.list_queues(QueueNamePrefix=prefix)
    assert len(response["QueueUrls"]) == 3
    assert "NextToken" not in response


@pytest.mark.parametrize("max_results", [0, 1001])
def test_list_queues_max_results_outside_1_to_1000_is_refused(sqs: Any, max_results: int) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.list_queues(MaxResults=max_results)
    assert error_code(excinfo) == "InvalidParameterValue"
    assert http_status(excinfo) == 400
