"""The last standard-queue differences from AWS (KQS issue 54, items 8-11), both protocols.

Sources: LocalStack's snapshots recorded against AWS (`tests/aws/services/sqs/test_sqs.py`,
`test_sqs.snapshot.json`) and the AWS API reference; where none settles a text, the test says
so.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.fifo_support import error_of
from tests.support.harness import NewQueue, signed_headers

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _query(url: str, params: dict[str, str]) -> tuple[int, str]:
    body = urllib.parse.urlencode({**params, "Version": "2012-11-05"}).encode()
    request = urllib.request.Request(
        url, data=body, headers=signed_headers(url, body, FORM), method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


# -- item 8: MessageSystemAttributeNames ---------------------------------------------------------


def test_receive_names_system_attributes_with_message_system_attribute_names(
    sqs: Any, new_queue: NewQueue, protocol: str
) -> None:
    # Given a message
    url = new_queue("sysnames")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    # When it is received naming MessageSystemAttributeNames All (as the current API model
    # names the list on either wire: `MessageSystemAttributeNames.1=All` in the Query form)
    if protocol == "json":
        [message] = sqs.receive_message(
            QueueUrl=url, MessageSystemAttributeNames=["All"], WaitTimeSeconds=5
        )["Messages"]
        names = set(message["Attributes"])
    else:
        status, xml = _query(
            url,
            {
                "Action": "ReceiveMessage",
                "WaitTimeSeconds": "5",
                "MessageSystemAttributeNames.1": "All",
            },
        )
        assert status == 200, xml
        names = {
            name
            for name in ("SenderId", "SentTimestamp", "ApproximateReceiveCount")
            if f"<Name>{name}</Name>" in xml
        }
    # Then its system attributes come back
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount"} <= names


# -- item 9: attributes set to their defaults ----------------------------------------------------


def test_attributes_set_to_their_defaults_list_as_a_new_queues_do(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue whose settable attributes were all set to their defaults
    url = new_queue("defaults")
    fresh = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "DelaySeconds": "0",
            "MaximumMessageSize": "1048576",
            "MessageRetentionPeriod": "345600",
            "ReceiveMessageWaitTimeSeconds": "0",
            "VisibilityTimeout": "30",
            "KmsMasterKeyId": "",
            "KmsDataKeyReusePeriodSeconds": "300",
            "SqsManagedSseEnabled": "true",
            "Policy": "",
            "RedrivePolicy": "",
            "RedriveAllowPolicy": "",
        },
    )
    # When all are read back
    after = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # Then the same names are listed (no KmsDataKeyReusePeriodSeconds without a KMS key)
    assert "KmsDataKeyReusePeriodSeconds" not in after
    assert sorted(after) == sorted(fresh)


# A KMS queue listing its reuse period at the default needs a gateway with a master key:
# tests/e2e/test_e2e_encryption_at_rest.py.


# -- item 10: SendMessageBatch against a lowered MaximumMessageSize ------------------------------


def test_a_batch_entry_at_a_lowered_maximum_size_is_sent_and_one_over_it_fails_alone(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue whose MaximumMessageSize was lowered to 2048
    url = new_queue("lowered")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "2048"})
    attributes = {"k": {"DataType": "String", "StringValue": "x"}}  # 1 + 6 + 1 bytes
    # When a batch sends an entry of exactly 2048 bytes, one of 2049 and a small one
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "at", "MessageBody": "a" * 2040, "MessageAttributes": attributes},
            {"Id": "over", "MessageBody": "a" * 2041, "MessageAttributes": attributes},
            {"Id": "small", "MessageBody": "a"},
        ],
    )
    # Then the entry at the limit is sent (AWS-recorded:
    # test_send_message_batch_with_oversized_contents_with_updated_maximum_message_size), and
    # the one over it fails alone, with SendMessage's text (no recording of that entry: the
    # text is what AWS answers a single send, AWS-recorded by
    # test_send_message_with_updated_maximum_message_size)
    assert sorted(e["Id"] for e in answer["Successful"]) == ["at", "small"]
    assert answer["Failed"] == [
        {
            "Id": "over",
            "SenderFault": True,
            "Code": "InvalidParameterValue",
            "Message": "One or more parameters are invalid. Reason: Message must be shorter "
            "than 2048 bytes.",
        }
    ]


# -- item 11: RemovePermission of an unknown label -----------------------------------------------


@pytest.mark.parametrize("with_policy", [False, True])
def test_remove_permission_of_an_unknown_label_answers_aws_text(
    sqs: Any, new_queue: NewQueue, with_policy: bool
) -> None:
    # test_sqs_permission_lifecycle (recorded against AWS): "can't find label."
    url = new_queue("perm")
    if with_policy:
        sqs.add_permission(
            QueueUrl=url, Label="kept", AWSAccountIds=["111122223333"], Actions=["SendMessage"]
        )
    with pytest.raises(ClientError) as excinfo:
        sqs.remove_permission(QueueUrl=url, Label="nope")
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        "Value nope for parameter Label is invalid. Reason: can't find label.",
        400,
    )
