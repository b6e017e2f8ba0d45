"""FIFO queues' control plane end to end, through both protocols, on real Kafka.

CreateQueue's name and FifoQueue rules, the FIFO attributes (defaults, validation, reading
them back), their absence on standard queues, and dead-letter queues of the same type. Codes
and texts are AWS's: LocalStack's AWS-validated tests (codes of the name rules), AWS users'
reports of CreateQueue errors (the RedrivePolicy type and FifoThroughputLimit texts, "You can
specify the DeduplicationScope only when FifoQueue is set to true"), cdkd's notes on
SetQueueAttributes, and SDK test suites run against AWS ("Unknown Attribute FifoQueue.").
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from confluent_kafka.admin import AdminClient

from tests.support.fifo_support import arn_of, error_of, new_fifo_queue, unique
from tests.support.harness import ACCOUNT_ID, NewQueue
from topology.catalog import group_partition

FIFO_NAME_RULE = (
    "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
    "underscores, must end with .fifo suffix and be 1 to 80 in length"
)
STANDARD_NAME_RULE = (
    "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
)
FIFO_ATTRIBUTES = (
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
)


def test_create_fifo_queue_has_the_fifo_defaults(sqs: Any) -> None:
    # Given a FIFO queue created with FifoQueue=true only
    name = f"{unique('fifo')}.fifo"
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    # When its attributes are read
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # Then the URL keeps the suffix and the FIFO attributes have SQS's defaults
    assert url.endswith("/" + name)
    assert {k: attributes[k] for k in FIFO_ATTRIBUTES} == {
        "FifoQueue": "true",
        "ContentBasedDeduplication": "false",
        "DeduplicationScope": "queue",
        "FifoThroughputLimit": "perQueue",
    }


def test_create_high_throughput_fifo_queue_reads_back_its_settings(sqs: Any) -> None:
    url = new_fifo_queue(
        sqs,
        ContentBasedDeduplication="true",
        DeduplicationScope="messageGroup",
        FifoThroughputLimit="perMessageGroupId",
    )
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ContentBasedDeduplication", "FifoThroughputLimit"]
    )["Attributes"]
    assert attributes == {
        "ContentBasedDeduplication": "true",
        "FifoThroughputLimit": "perMessageGroupId",
    }


def test_create_fifo_queue_is_idempotent_with_its_defaults(sqs: Any) -> None:
    name = f"{unique('again')}.fifo"
    first = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    second = sqs.create_queue(
        QueueName=name, Attributes={"FifoQueue": "true", "DeduplicationScope": "queue"}
    )["QueueUrl"]
    assert first == second
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(
            QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        )
    assert error_of(excinfo) == (
        "QueueAlreadyExists",
        "A queue already exists with the same name and a different value for attribute "
        "ContentBasedDeduplication",
        400,
    )


@pytest.mark.parametrize(
    ("name", "attributes", "message"),
    [
        ("{}", {"FifoQueue": "true"}, FIFO_NAME_RULE),
        ("{}.fifo", {}, STANDARD_NAME_RULE),
        (
            "{}.fifo",
            {"ContentBasedDeduplication": "true"},
            "Unknown Attribute ContentBasedDeduplication.",
        ),
        ("bad name{}.fifo", {"FifoQueue": "true"}, FIFO_NAME_RULE),
        ("{}" + "x" * 70 + ".fifo", {"FifoQueue": "true"}, FIFO_NAME_RULE),
    ],
)
def test_create_queue_refuses_a_name_and_fifo_attribute_that_disagree(
    sqs: Any, name: str, attributes: dict[str, str], message: str
) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name.format(unique("n")), Attributes=attributes)
    code = "InvalidAttributeName" if message.startswith("Unknown") else "InvalidParameterValue"
    assert error_of(excinfo) == (code, message, 400)


def test_create_fifo_queue_accepts_a_name_of_80_characters(sqs: Any) -> None:
    name = unique("long").ljust(75, "x") + ".fifo"
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert url.endswith("/" + name)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ContentBasedDeduplication", "true", "Unknown Attribute ContentBasedDeduplication."),
        (
            "DeduplicationScope",
            "messageGroup",
            "You can specify the DeduplicationScope only when FifoQueue is set to true.",
        ),
        (
            "FifoThroughputLimit",
            "perMessageGroupId",
            "You can specify the FifoThroughputLimit only when FifoQueue is set to true.",
        ),
    ],
)
def test_create_standard_queue_refuses_fifo_attributes(
    sqs: Any, name: str, value: str, message: str
) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=unique("std"), Attributes={name: value})
    assert error_of(excinfo) == ("InvalidAttributeName", message, 400)


def test_standard_queue_refuses_fifo_queue_false(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=unique("std"), Attributes={"FifoQueue": "false"})
    assert error_of(excinfo) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.", 400)


@pytest.mark.parametrize("name", FIFO_ATTRIBUTES)
def test_fifo_attributes_are_unknown_to_a_standard_queue(
    sqs: Any, new_queue: NewQueue, name: str
) -> None:
    # Given a standard queue
    url = new_queue("std")
    # When a FIFO attribute is asked for, or set
    with pytest.raises(ClientError) as read:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])
    with pytest.raises(ClientError) as written:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: "true"})
    # Then both are InvalidAttributeName (setting a throughput setting names FifoQueue), and
    # All does not list it
    assert error_of(read) == ("InvalidAttributeName", f"Unknown Attribute {name}.", 400)
    set_message = (
        f"You can specify the {name} only when FifoQueue is set to true."
        if name in ("DeduplicationScope", "FifoThroughputLimit")
        else f"Unknown Attribute {name}."
    )
    assert error_of(written) == ("InvalidAttributeName", set_message, 400)
    everything = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert name not in everything


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ContentBasedDeduplication", "yes"),
        ("DeduplicationScope", "group"),
        ("FifoThroughputLimit", "perGroup"),
    ],
)
def test_fifo_attribute_values_are_validated(sqs: Any, name: str, value: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        new_fifo_queue(sqs, **{name: value})
    assert error_of(excinfo) == (
        "InvalidAttributeValue",
        f"Invalid value for the parameter {name}.",
        400,
    )


def test_per_message_group_throughput_needs_message_group_deduplication(sqs: Any) -> None:
    reason = (
        "Invalid value for the parameter FifoThroughputLimit. Reason: To set "
        "FifoThroughputLimit to perMessageGroupId, the DeduplicationScope must be messageGroup."
    )
    # Refused at creation with the default (queue) scope
    with pytest.raises(ClientError) as created:
        new_fifo_queue(sqs, FifoThroughputLimit="perMessageGroupId")
    assert error_of(created) == ("InvalidAttributeValue", reason, 400)
    # And on a queue that has it, moving the scope back is refused too
    url = new_fifo_queue(
        sqs, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId"
    )
    with pytest.raises(ClientError) as changed:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "queue"})
    assert error_of(changed) == ("InvalidAttributeValue", reason, 400)


def test_set_queue_attributes_changes_fifo_settings(sqs: Any) -> None:
    url = new_fifo_queue(sqs)
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "ContentBasedDeduplication": "TRUE",
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
        },
    )
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ContentBasedDeduplication"] == "true"
    assert attributes["DeduplicationScope"] == "messageGroup"
    assert attributes["FifoThroughputLimit"] == "perMessageGroupId"


@pytest.mark.parametrize("source_fifo", [True, False])
def test_dead_letter_queue_must_be_of_the_source_queues_type(
    sqs: Any, new_queue: NewQueue, source_fifo: bool
) -> None:
    # Given a dead-letter queue of the other type
    dlq_url = new_queue("std-dlq") if source_fifo else new_fifo_queue(sqs, "fifo-dlq")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq_url), "maxReceiveCount": 3})
    # When a queue names it in its RedrivePolicy
    with pytest.raises(ClientError) as excinfo:
        if source_fifo:
            new_fifo_queue(sqs, "src", RedrivePolicy=policy)
        else:
            new_queue("src", RedrivePolicy=policy)
    # Then it is refused, with AWS's text (its double full stop included)
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        f"Value {policy.replace(' ', '')} for parameter RedrivePolicy is invalid. Reason: "
        "Dead-letter queue must be same type of queue as the source..",
        400,
    )


def test_fifo_queue_accepts_a_fifo_dead_letter_queue(sqs: Any) -> None:
    dlq_url = new_fifo_queue(sqs, "dlq")
    policy = {"deadLetterTargetArn": arn_of(dlq_url), "maxReceiveCount": 2}
    url = new_fifo_queue(sqs, "src", RedrivePolicy=json.dumps(policy))
    stored = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
    assert json.loads(stored["Attributes"]["RedrivePolicy"]) == policy


def test_high_throughput_fifo_queue_spreads_its_groups_over_more_partitions(
    sqs: Any, kafka_bootstrap: str
) -> None:
    # Given a FIFO queue created in high-throughput mode, and one in the default mode
    fast = new_fifo_queue(
        sqs, "fast", DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId"
    )
    plain = new_fifo_queue(sqs, "plain")
    # When messages of several groups are sent to the first
    sent = [
        sqs.send_message(QueueUrl=fast, MessageBody=g, MessageGroupId=g, MessageDeduplicationId=g)
        for g in ("alpha", "beta", "gamma", "delta", "epsilon")
    ]
    # Then its topic has four partitions (the other the gateway's default of one), and the
    # groups landed on more than one of them
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topics = admin.list_topics(timeout=10).topics

    def partitions_of(url: str) -> int:
        name = url.rsplit("/", 1)[1]
        [topic] = [t for t in topics if t.startswith(f"kqs.{ACCOUNT_ID}.{name}.")]
        return len(topics[topic].partitions)

    assert (partitions_of(fast), partitions_of(plain)) == (4, 1)
    assert len({group_partition(g, 4) for g in ("alpha", "beta", "gamma", "delta", "epsilon")}) > 1
    assert all(len(s["SequenceNumber"]) == 20 for s in sent)
    received = sqs.receive_message(QueueUrl=fast, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    messages = received.get("Messages", [])
    while len(messages) < 5:
        more = sqs.receive_message(QueueUrl=fast, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        assert "Messages" in more
        messages += more["Messages"]
    assert sorted(m["Body"] for m in messages) == ["alpha", "beta", "delta", "epsilon", "gamma"]
