"""AWS parity end to end, through both protocols on real Kafka: the Query endpoint rules of
queue URLs and the error codes and texts SQS answers with (issue 14, items 4 and 5).

Each expected text names where it was checked against AWS; docs/ARCHITECTURE.md ("Error
texts") lists the sources.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import GatewayProcess, NewQueue, signed_headers

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
NOT_AVAILABLE = "Message does not exist or is not available for visibility timeout change."


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, str]:
    response = excinfo.value.response
    return (
        response["ResponseMetadata"]["HTTPStatusCode"],
        response["Error"]["Code"],
        response["Error"]["Message"],
    )


def _http(
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    method: str = "POST",
    sign: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    sent = signed_headers(url, body or b"", headers, method) if sign else headers
    request = urllib.request.Request(url, data=body, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _receive_one(sqs: Any, url: str, **kwargs: Any) -> dict[str, Any]:
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, **kwargs)["Messages"]
    assert len(messages) == 1
    message: dict[str, Any] = messages[0]
    return message


# -- Query endpoint rules (item 4) ------------------------------------------------------------


@pytest.mark.parametrize("action", ["CreateQueue", "ListQueues"])
def test_account_wide_action_on_a_queue_url_is_an_invalid_action(
    gateway: GatewayProcess, scratch_queue: str, action: str
) -> None:
    # Given a queue URL (LocalStack's AWS-validated query API: query_api.py / TestSqsQueryApi)
    body = urllib.parse.urlencode({"Action": action, "QueueName": "x"}).encode()
    # When an account-wide action is sent to it, as XML and as JSON
    status, _, xml = _http(scratch_queue, body, FORM)
    json_status, headers, json_body = _http(
        scratch_queue, body, {**FORM, "Accept": "application/json"}
    )
    # Then it is InvalidAction, 400, in the format asked for
    message = f"The action {action} is not valid for this endpoint."
    assert status == 400
    assert b"<Code>InvalidAction</Code>" in xml
    assert f"<Message>{message}</Message>".encode() in xml
    assert json_status == 400
    assert headers["Content-Type"].startswith("application/json")
    error = json.loads(json_body)["Error"]
    assert (error["Code"], error["Message"], error["Type"]) == ("InvalidAction", message, "Sender")


def test_get_of_a_queue_url_without_action_is_unknown_operation(
    gateway: GatewayProcess, scratch_queue: str
) -> None:
    status, _, body = _http(scratch_queue, None, {}, method="GET", sign=False)
    assert status == 404
    assert body == b"<UnknownOperationException/>"


def test_query_on_the_service_root_without_action_is_still_missing_action(
    gateway: GatewayProcess,
) -> None:
    status, _, body = _http(gateway.endpoint + "/", b"Version=2012-11-05", FORM)
    assert status == 400
    assert b"<Code>MissingAction</Code>" in body


def test_message_system_attribute_name_list_is_accepted_on_query_receive(
    gateway: GatewayProcess, new_queue: NewQueue, sqs: Any
) -> None:
    # Given a message
    url = new_queue("sysattr")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    # When a raw Query receive names system attributes with MessageSystemAttributeName.N
    body = urllib.parse.urlencode(
        {
            "Action": "ReceiveMessage",
            "Version": "2012-11-05",
            "WaitTimeSeconds": "5",
            "MessageSystemAttributeName.1": "SenderId",
            "MessageSystemAttributeName.2": "ApproximateReceiveCount",
        }
    ).encode()
    status, _, xml = _http(url, body, FORM)
    # Then exactly those come back
    assert status == 200, xml
    assert b"<Name>ApproximateReceiveCount</Name><Value>1</Value>" in xml
    assert b"<Name>SenderId</Name>" in xml
    assert b"SentTimestamp" not in xml


# -- Error codes and texts (item 5) -------------------------------------------------------------


@pytest.mark.parametrize("body", [None, ""], ids=["missing", "empty"])
def test_send_without_a_body_is_missing_parameter(
    gateway: GatewayProcess, scratch_queue: str, protocol: str, body: str | None
) -> None:
    # botocore refuses a missing MessageBody itself, so the request is built by hand.
    # (LocalStack's check_message_min_size; moto and emulators' AWS-recorded texts agree.)
    params: dict[str, Any] = {"QueueUrl": scratch_queue}
    if body is not None:
        params["MessageBody"] = body
    if protocol == "json":
        status, headers, raw = _http(
            gateway.endpoint,
            json.dumps(params).encode(),
            {
                "Content-Type": "application/x-amz-json-1.0",
                "X-Amz-Target": "AmazonSQS.SendMessage",
            },
        )
        assert headers["x-amzn-query-error"] == "MissingParameter;Sender"
        message = json.loads(raw)["message"]
    else:
        status, _, raw = _http(
            gateway.endpoint,
            urllib.parse.urlencode({"Action": "SendMessage", **params}).encode(),
            FORM,
        )
        assert b"<Code>MissingParameter</Code>" in raw
        message = raw.decode().split("<Message>")[1].split("</Message>")[0]
    assert status == 400
    assert message == "The request must contain the parameter MessageBody."


@pytest.mark.parametrize("handle", ["x", "not-a-handle", "AQ" * 40])
@pytest.mark.parametrize("action", ["delete_message", "change_message_visibility"])
def test_invalid_receipt_handle_is_refused_with_the_sqs_text(
    sqs: Any, scratch_queue: str, handle: str, action: str
) -> None:
    extra = {"VisibilityTimeout": 0} if action == "change_message_visibility" else {}
    with pytest.raises(ClientError) as excinfo:
        getattr(sqs, action)(QueueUrl=scratch_queue, ReceiptHandle=handle, **extra)
    assert error_of(excinfo) == (
        400,
        "ReceiptHandleIsInvalid",
        f'The input receipt handle "{handle}" is not a valid receipt handle.',
    )


def test_visibility_change_of_a_deleted_message_names_the_handle(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a received and deleted message (text: LocalStack's AWS-validated provider)
    url = new_queue("visgone")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = _receive_one(sqs, url)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    # When its visibility is changed
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=5)
    # Then
    assert error_of(excinfo) == (
        400,
        "InvalidParameterValue",
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: {NOT_AVAILABLE}",
    )


@pytest.mark.parametrize("wait", [-1, 21])
def test_wait_time_seconds_out_of_range_is_refused(sqs: Any, scratch_queue: str, wait: int) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.receive_message(QueueUrl=scratch_queue, WaitTimeSeconds=wait)
    assert error_of(excinfo) == (
        400,
        "InvalidParameterValue",
        f"Value {wait} for parameter WaitTimeSeconds is invalid. "
        "Reason: Must be >= 0 and <= 20, if provided.",
    )


_BAD_CHARS = (
    "Message (user) attributes name can only contain upper and lower score characters, "
    "digits, periods, hyphens and underscores. "
)
_RESERVED = (
    "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings "
    "are reserved for internal use. Additionally, they cannot start or end with '.'."
)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Invalid-!-attr", _BAD_CHARS),
        ("Invalid-(-attr", _BAD_CHARS),
        ("with space", _BAD_CHARS),
        ("aWs.x", _RESERVED),
        ("AMAZON.x", _RESERVED),
        (".leading", _RESERVED),
        ("trailing.", _RESERVED),
        ("L" * 257, "Message (user) attribute names must be shorter than 256 Bytes"),
    ],
)
def test_invalid_attribute_names_are_refused_with_the_sqs_text(
    sqs: Any, scratch_queue: str, name: str, message: str
) -> None:
    # LocalStack's AWS-validated test_send_message_with_invalid_string_attributes (cases),
    # texts from its provider and from emulators reproducing AWS's.
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(
            QueueUrl=scratch_queue,
            MessageBody="m",
            MessageAttributes={name: {"DataType": "String", "StringValue": "v"}},
        )
    assert error_of(excinfo) == (400, "InvalidParameterValue", message)


def test_attribute_name_with_latin_letters_is_accepted(sqs: Any, new_queue: NewQueue) -> None:
    # AWS accepts it (LocalStack's AWS-validated test: "attr.1øßä").
    url = new_queue("umlaut")
    attributes = {"attr.1øßä": {"DataType": "String", "StringValue": "Valida"}}
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=attributes)
    received = _receive_one(sqs, url, MessageAttributeNames=["All"])
    assert received["MessageAttributes"] == attributes


@pytest.mark.parametrize("data_type", ["String", "Number", "String.custom"])
def test_empty_string_attribute_value_is_refused(
    sqs: Any, scratch_queue: str, data_type: str
) -> None:
    # LocalStack's AWS-validated test_send_message_with_empty_string_attribute.
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(
            QueueUrl=scratch_queue,
            MessageBody="m",
            MessageAttributes={"ErrorDetails": {"DataType": data_type, "StringValue": ""}},
        )
    base = data_type.split(".")[0]
    assert error_of(excinfo) == (
        400,
        "InvalidParameterValue",
        f"Message (user) attribute 'ErrorDetails' must contain a non-empty value of type '{base}'.",
    )


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (["All"], {"General", "Hello", "Help.Me"}),
        (["*"], {"General", "Hello", "Help.Me"}),
        ([".*"], {"General", "Hello", "Help.Me"}),
        (["Foo", "Help"], set()),
        (["Hello", "General"], {"Hello", "General"}),
        (["Foo", "Hello"], {"Hello"}),
        (["Hel.*"], {"Hello", "Help.Me"}),
        (["AWS."], set()),
        (["..foo"], set()),
    ],
)
def test_message_attribute_names_filter_as_sqs_does(
    sqs: Any, new_queue: NewQueue, requested: list[str], expected: set[str]
) -> None:
    # The cases and answers of LocalStack's AWS-recorded snapshot
    # test_receive_message_message_attribute_names_filters.
    url = new_queue("attrfilter")
    sqs.send_message(
        QueueUrl=url,
        MessageBody="msg",
        MessageAttributes={
            name: {"DataType": "String", "StringValue": value}
            for name, value in (("General", "Kenobi"), ("Hello", "There"), ("Help.Me", "Me"))
        },
    )
    received = _receive_one(sqs, url, MessageAttributeNames=requested)
    assert set(received.get("MessageAttributes", {})) == expected
    assert ("MD5OfMessageAttributes" in received) == bool(expected)


def test_create_queue_with_a_different_attribute_names_it(sqs: Any, new_queue: NewQueue) -> None:
    # AWS-recorded: LocalStack snapshot test_create_queue_with_different_attributes_raises_exception
    url = new_queue("diffattr", VisibilityTimeout="45")
    name = url.rsplit("/", 1)[1]
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(
            QueueName=name, Attributes={"VisibilityTimeout": "45", "DelaySeconds": "3"}
        )
    assert error_of(excinfo) == (
        400,
        "QueueAlreadyExists",
        "A queue already exists with the same name and a different value for attribute "
        "DelaySeconds",
    )


def test_tag_queue_over_fifty_tags_names_the_queue(sqs: Any, new_queue: NewQueue) -> None:
    # moto's test_tag_queue_errors (text); the tags stay as they were.
    url = new_queue("tags51")
    name = url.rsplit("/", 1)[1]
    sqs.tag_queue(QueueUrl=url, Tags={"kept": "v"})
    with pytest.raises(ClientError) as excinfo:
        sqs.tag_queue(QueueUrl=url, Tags={f"k{i}": "v" for i in range(51)})
    assert error_of(excinfo) == (
        400,
        "InvalidParameterValue",
        f"Too many tags added for queue {name}.",
    )
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"kept": "v"}


def test_untag_queue_without_keys_is_refused(
    gateway: GatewayProcess, scratch_queue: str, sqs: Any, protocol: str
) -> None:
    # moto's untag_queue (text). botocore refuses an empty TagKeys itself, so by hand.
    if protocol == "json":
        status, _, raw = _http(
            gateway.endpoint,
            json.dumps({"QueueUrl": scratch_queue, "TagKeys": []}).encode(),
            {
                "Content-Type": "application/x-amz-json-1.0",
                "X-Amz-Target": "AmazonSQS.UntagQueue",
            },
        )
        code, message = json.loads(raw)["__type"].split("#")[1], json.loads(raw)["message"]
        assert code == "InvalidParameterValueException"
    else:
        status, _, raw = _http(scratch_queue, b"Action=UntagQueue", FORM)
        text = raw.decode()
        code = text.split("<Code>")[1].split("</Code>")[0]
        message = text.split("<Message>")[1].split("</Message>")[0]
        assert code == "InvalidParameterValue"
    assert status == 400
    assert message == "Tag keys must be between 1 and 128 characters in length."


def test_add_permission_writes_a_2008_10_17_policy(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("perm")
    sqs.add_permission(
        QueueUrl=url, Label="share", AWSAccountIds=["111122223333"], Actions=["SendMessage"]
    )
    policy = json.loads(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    )
    assert policy["Version"] == "2008-10-17"


def test_a_kms_key_is_refused_by_a_gateway_without_a_master_key(
    sqs: Any, scratch_queue: str
) -> None:
    # The session's gateway has no master key: a queue may not claim KMS encryption there.
    # (With one, a KMS queue lists its key, the reuse period and SqsManagedSseEnabled false,
    # as LocalStack's AWS-recorded snapshot test_sse_queue_attributes shows:
    # tests/e2e/test_e2e_encryption_at_rest.py.)
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=scratch_queue, Attributes={"KmsMasterKeyId": "k"})
    assert error_of(excinfo)[:2] == (400, "InvalidAttributeValue")


def test_kms_and_sqs_managed_encryption_exclude_each_other(sqs: Any, scratch_queue: str) -> None:
    # AWS-recorded: LocalStack snapshot test_sse_kms_and_sqs_are_mutually_exclusive.
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(
            QueueUrl=scratch_queue,
            Attributes={"KmsMasterKeyId": "testKeyId", "SqsManagedSseEnabled": "true"},
        )
    assert error_of(excinfo) == (
        400,
        "InvalidAttributeName",
        "You can use one type of server-side encryption (SSE) at one time. You can either "
        "enable KMS SSE or SQS SSE.",
    )
