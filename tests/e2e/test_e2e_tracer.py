"""The tracer: the seven skeleton actions end to end, through both protocols, on real Kafka."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from tests.support.harness import ACCOUNT_ID, GatewayProcess, signed_headers


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> dict[str, Any]:
    error: dict[str, Any] = excinfo.value.response["Error"]
    return error


def test_create_queue_returns_url_on_the_called_host(sqs: Any, gateway: GatewayProcess) -> None:
    # Given
    name = f"orders-{uuid.uuid4().hex[:8]}"
    # When
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    # Then
    assert url == f"{gateway.endpoint}/{ACCOUNT_ID}/{name}"
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert url in sqs.list_queues(QueueNamePrefix=name)["QueueUrls"]


def test_create_queue_twice_with_same_attributes_returns_same_url(sqs: Any) -> None:
    name = f"same-{uuid.uuid4().hex[:8]}"
    first = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    second = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    assert first == second


def test_create_queue_with_different_attributes_is_refused(sqs: Any, protocol: str) -> None:
    name = f"diff-{uuid.uuid4().hex[:8]}"
    sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "46"})
    assert error_of(excinfo)["Code"] == "QueueAlreadyExists"
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_send_receive_delete_round_trip(sqs: Any, new_queue: Callable[..., str]) -> None:
    # Given
    url = new_queue("tracer")
    # When
    sent = sqs.send_message(QueueUrl=url, MessageBody="hi")
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    # Then
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"hi").hexdigest()
    assert len(received) == 1
    message = received[0]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "hi"
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    # When it is deleted, it never comes back
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    after = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=1)
    assert "Messages" not in after


def test_received_message_is_hidden_until_its_visibility_timeout_ends(
    sqs: Any, new_queue: Callable[..., str]
) -> None:
    # Given a message received with a 1 s visibility timeout
    url = new_queue("vis")
    sqs.send_message(QueueUrl=url, MessageBody="lease me")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]
    # When another receive polls right away
    hidden = sqs.receive_message(QueueUrl=url)
    # Then it sees nothing, and a long poll gets the message back once the lease ends
    assert "Messages" not in hidden
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, AttributeNames=["All"])
    message = again["Messages"][0]
    assert message["MessageId"] == first["MessageId"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"
    assert message["ReceiptHandle"] != first["ReceiptHandle"]


def test_queue_visibility_timeout_applies_when_receive_gives_none(
    sqs: Any, new_queue: Callable[..., str]
) -> None:
    url = new_queue("qvis", VisibilityTimeout="1")
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.receive_message(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    assert "Messages" in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)


def test_body_with_carriage_returns_and_unicode_survives_both_protocols(
    sqs: Any, new_queue: Callable[..., str]
) -> None:
    url = new_queue("chars")
    body = 'line1\r\nline2\r<tag attr="v">&amp; ünïcødé 🎉\t'
    sqs.send_message(QueueUrl=url, MessageBody=body)
    message = sqs.receive_message(QueueUrl=url)["Messages"][0]
    assert message["Body"] == body
    assert message["MD5OfBody"] == hashlib.md5(body.encode()).hexdigest()


def test_queue_url_may_be_a_bare_name_or_another_host(
    sqs: Any, new_queue: Callable[..., str]
) -> None:
    url = new_queue("addr")
    name = url.rsplit("/", 1)[1]
    sqs.send_message(QueueUrl=name, MessageBody="by name")
    sqs.send_message(QueueUrl=f"https://sqs.example.com/{ACCOUNT_ID}/{name}", MessageBody="by host")
    bodies = {
        m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    }
    assert bodies == {"by name", "by host"}


def test_missing_queue_is_reported_with_the_sqs_code_and_protocol_message(
    sqs: Any, protocol: str
) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.get_queue_url(QueueName=f"absent-{uuid.uuid4().hex[:8]}")
    error = error_of(excinfo)
    assert error["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    expected = (
        "The specified queue does not exist for this wsdl version."
        if protocol == "query"
        else "The specified queue does not exist."
    )
    assert error["Message"] == expected


def test_send_to_missing_queue_fails(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=f"{ACCOUNT_ID}/nope-{uuid.uuid4().hex[:6]}", MessageBody="x")
    assert error_of(excinfo)["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_deleted_queue_is_gone(sqs: Any, new_queue: Callable[..., str]) -> None:
    url = new_queue("gone")
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(ClientError) as excinfo:
        sqs.get_queue_url(QueueName=url.rsplit("/", 1)[1])
    assert error_of(excinfo)["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert url not in sqs.list_queues().get("QueueUrls", [])


def test_delete_with_garbage_receipt_handle_is_refused(
    sqs: Any, new_queue: Callable[..., str]
) -> None:
    url = new_queue("garbage")
    with pytest.raises(ClientError) as excinfo:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    error = error_of(excinfo)
    assert error["Code"] == "ReceiptHandleIsInvalid"
    assert (
        error["Message"] == 'The input receipt handle "not-a-handle" is not a valid receipt handle.'
    )


def test_client_side_validation_is_not_what_we_rely_on(sqs: Any) -> None:
    # botocore refuses a missing QueueName before sending; the raw tests below cover the server.
    with pytest.raises(ParamValidationError):
        sqs.create_queue()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    signed = signed_headers(url, body, headers)
    request = urllib.request.Request(url, data=body, headers=signed, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_missing_parameter_in_query_protocol_is_an_xml_error(gateway: GatewayProcess) -> None:
    status, _, body = _post(
        gateway.endpoint,
        b"Action=CreateQueue&Version=2012-11-05",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 400
    assert b"<Code>MissingParameter</Code>" in body
    assert b"<Type>Sender</Type>" in body
    assert b"The request must contain the parameter QueueName." in body


def test_missing_parameter_in_json_protocol_has_type_and_query_error_header(
    gateway: GatewayProcess,
) -> None:
    status, headers, body = _post(
        gateway.endpoint,
        b"{}",
        {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.CreateQueue"},
    )
    assert status == 400
    assert json.loads(body) == {
        "__type": "com.amazonaws.sqs#MissingRequiredParameterException",
        "message": "The request must contain the parameter QueueName.",
    }
    assert {k.lower(): v for k, v in headers.items()}[
        "x-amzn-query-error"
    ] == "MissingParameter;Sender"


def test_unknown_action_is_refused_in_both_protocols(gateway: GatewayProcess) -> None:
    status, _, body = _post(
        gateway.endpoint,
        b"Action=FlyToTheMoon",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 400
    assert b"<Code>InvalidAction</Code>" in body
    status, headers, body = _post(
        gateway.endpoint,
        b"{}",
        {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.FlyToTheMoon"},
    )
    assert status == 400
    assert json.loads(body)["__type"] == "com.amazonaws.sqs#UnknownOperationException"
    assert {k.lower(): v for k, v in headers.items()}[
        "x-amzn-query-error"
    ] == "InvalidAction;Sender"


def test_query_request_on_the_queue_url_path_targets_that_queue(
    gateway: GatewayProcess, new_queue: Callable[..., str], protocol: str
) -> None:
    url = new_queue("path")
    status, _, body = _post(
        url,
        b"Action=SendMessage&MessageBody=via+path&Version=2012-11-05",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 200, body
    assert b"<MD5OfMessageBody>" + hashlib.md5(b"via path").hexdigest().encode() in body
