"""The message plane end to end, through both protocols on real Kafka: attributes and their
checksums, validation of sends, receive semantics, receipt-handle rules and dead-lettering."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.attribute_md5 import attributes_md5
from tests.support.harness import (
    ACCOUNT_ID,
    REGION,
    GatewayProcess,
    NewQueue,
    json_client,
    query_client,
)

TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
TRACE_HEADER_MD5 = "5ae4d5d7636402d80f4eb6d213245a88"
NOT_AVAILABLE = "Message does not exist or is not available for visibility timeout change."


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> dict[str, Any]:
    error: dict[str, Any] = excinfo.value.response["Error"]
    return error


def arn_of(url: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{url.rsplit('/', 1)[1]}"


def receive_one(sqs: Any, url: str, **kwargs: Any) -> dict[str, Any]:
    messages = sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])
    assert len(messages) == 1, messages
    message: dict[str, Any] = messages[0]
    return message


def nothing_to_receive(sqs: Any, url: str, **kwargs: Any) -> bool:
    return "Messages" not in sqs.receive_message(QueueUrl=url, **kwargs)


ALL_TYPES: dict[str, dict[str, Any]] = {
    "text": {"DataType": "String", "StringValue": "héllo\r\nwörld 🎉"},
    "count": {"DataType": "Number", "StringValue": "-12.5e3"},
    "blob": {"DataType": "Binary", "BinaryValue": bytes(range(256))},
    "label": {"DataType": "String.custom", "StringValue": "tagged"},
    "int": {"DataType": "Number.int", "StringValue": "42"},
    "image": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a\x00\x01"},
}


# -- message attributes ---------------------------------------------------------------------


def test_message_attributes_of_every_type_round_trip_with_the_spec_md5(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue
    url = new_queue("attrs")
    # When a message with String, Number, Binary and custom-labelled attributes is sent
    sent = sqs.send_message(QueueUrl=url, MessageBody="typed", MessageAttributes=ALL_TYPES)
    received = receive_one(sqs, url, MessageAttributeNames=["All"])
    # Then both answers carry the MD5 the spec defines, and the attributes come back intact
    expected_md5 = attributes_md5(ALL_TYPES)
    assert sent["MD5OfMessageAttributes"] == expected_md5
    assert received["MD5OfMessageAttributes"] == expected_md5
    assert received["MessageAttributes"] == ALL_TYPES
    assert received["MD5OfBody"] == hashlib.md5(b"typed").hexdigest()


def test_message_without_attributes_has_no_attribute_md5(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("noattrs")
    sent = sqs.send_message(QueueUrl=url, MessageBody="plain")
    received = receive_one(sqs, url, MessageAttributeNames=["All"], AttributeNames=["All"])
    assert "MD5OfMessageAttributes" not in sent
    assert "MD5OfMessageSystemAttributes" not in sent
    assert "MD5OfMessageAttributes" not in received
    assert "MessageAttributes" not in received


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (["All"], {"color.primary", "color.secondary", "size", "sizes"}),
        ([".*"], {"color.primary", "color.secondary", "size", "sizes"}),
        (["color.*"], {"color.primary", "color.secondary"}),
        (["size"], {"size"}),
        (["size", "color.primary", "absent"], {"size", "color.primary"}),
        (["absent"], set()),
        ([], set()),
    ],
)
def test_receive_returns_only_the_requested_message_attributes_and_their_md5(
    sqs: Any, new_queue: NewQueue, requested: list[str], expected: set[str]
) -> None:
    # Given a message with four attributes
    url = new_queue("filter")
    attributes: dict[str, dict[str, Any]] = {
        "color.primary": {"DataType": "String", "StringValue": "red"},
        "color.secondary": {"DataType": "String", "StringValue": "blue"},
        "size": {"DataType": "Number", "StringValue": "3"},
        "sizes": {"DataType": "Binary", "BinaryValue": b"\x01\x02"},
    }
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=attributes)
    # When it is received asking for some of them
    message = receive_one(sqs, url, MessageAttributeNames=requested)
    # Then exactly those come back, and the MD5 covers only those (absent when none)
    returned = message.get("MessageAttributes", {})
    assert set(returned) == expected
    assert message.get("MD5OfMessageAttributes") == attributes_md5(
        {name: attributes[name] for name in expected}
    )


def _named(name: str, value: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return {name: value or {"DataType": "String", "StringValue": "v"}}


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param(_named("AWS.reserved"), id="aws-prefix"),
        pytest.param(_named("amazon.reserved"), id="amazon-prefix-any-case"),
        pytest.param(_named(".leading"), id="leading-dot"),
        pytest.param(_named("trailing."), id="trailing-dot"),
        pytest.param(_named("double..dot"), id="double-dot"),
        pytest.param(_named("has space"), id="bad-character"),
        pytest.param(_named("n" * 257), id="name-too-long"),
        pytest.param(
            {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)},
            id="eleven-attributes",
        ),
        pytest.param(_named("t", {"DataType": "Float", "StringValue": "1"}), id="unknown-type"),
        pytest.param(
            _named("t", {"DataType": "String." + "x" * 250, "StringValue": "1"}),
            id="type-too-long",
        ),
        pytest.param(_named("t", {"DataType": "String", "StringValue": ""}), id="empty-string"),
        pytest.param(_named("t", {"DataType": "Number", "StringValue": "abc"}), id="not-a-number"),
        pytest.param(
            _named("t", {"DataType": "Number", "StringValue": "1" + "0" * 38}), id="39-digits"
        ),
        pytest.param(
            _named("t", {"DataType": "Number", "StringValue": "1e127"}), id="number-too-large"
        ),
        pytest.param(
            _named("t", {"DataType": "Binary", "StringValue": "text"}), id="binary-in-string"
        ),
        pytest.param(
            _named("t", {"DataType": "String", "StringValue": "bad\u0000char"}),
            id="invalid-character",
        ),
    ],
)
def test_invalid_message_attributes_are_refused(
    sqs: Any, scratch_queue: str, attributes: dict[str, dict[str, Any]]
) -> None:
    url = scratch_queue
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=attributes)
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert nothing_to_receive(sqs, url)


def test_ten_attributes_with_38_digit_numbers_are_accepted(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("tenattr")
    attributes = {f"n{i}": {"DataType": "Number", "StringValue": "9" * 38} for i in range(10)}
    sent = sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=attributes)
    assert sent["MD5OfMessageAttributes"] == attributes_md5(attributes)


def test_trace_header_system_attribute_is_kept_apart_from_message_attributes(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message sent with AWSTraceHeader as a system attribute
    url = new_queue("trace")
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="traced",
        MessageSystemAttributes={
            "AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}
        },
    )
    # When it is received asking for it
    message = receive_one(
        sqs, url, AttributeNames=["AWSTraceHeader"], MessageAttributeNames=["All"]
    )
    # Then the system-attribute MD5 is the reference one, and no message-attribute MD5 appears
    assert sent["MD5OfMessageSystemAttributes"] == TRACE_HEADER_MD5
    assert "MD5OfMessageAttributes" not in sent
    assert message["Attributes"] == {"AWSTraceHeader": TRACE_HEADER}
    assert "MD5OfMessageAttributes" not in message


def test_trace_header_is_taken_from_the_x_amzn_trace_id_http_header(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a client that adds X-Amzn-Trace-Id to its SendMessage requests
    url = new_queue("xray")

    def add_trace_header(request: Any, **_: Any) -> None:
        request.headers["X-Amzn-Trace-Id"] = TRACE_HEADER

    sqs.meta.events.register("before-sign.sqs.SendMessage", add_trace_header)
    try:
        # When it sends a message without system attributes
        sqs.send_message(QueueUrl=url, MessageBody="from header")
    finally:
        sqs.meta.events.unregister("before-sign.sqs.SendMessage", add_trace_header)
    # Then the message carries the header as its AWSTraceHeader
    message = receive_one(sqs, url, AttributeNames=["All"])
    assert message["Attributes"]["AWSTraceHeader"] == TRACE_HEADER


def test_only_aws_trace_header_can_be_sent_as_a_system_attribute(
    sqs: Any, scratch_queue: str
) -> None:
    url = scratch_queue
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(
            QueueUrl=url,
            MessageBody="m",
            MessageSystemAttributes={"SenderId": {"DataType": "String", "StringValue": "me"}},
        )
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"


# -- send validation ------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["nul\u0000", "\uffff", "bell\u0007", "\ufffe"])
def test_body_with_invalid_characters_is_refused(sqs: Any, scratch_queue: str, body: str) -> None:
    url = scratch_queue
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    assert error_of(excinfo)["Code"] == "InvalidMessageContents"
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_body_with_every_allowed_character_class_is_accepted(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("okbody")
    body = "\t\n\r \ud7ff\ue000\ufffd\U00010000\U0010ffff"
    sqs.send_message(QueueUrl=url, MessageBody=body)
    assert receive_one(sqs, url)["Body"] == body


def test_message_larger_than_the_queue_maximum_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    # Given a queue whose MaximumMessageSize is 1024 bytes
    url = new_queue("small", MaximumMessageSize="1024")
    # When 1024 bytes are sent, then 1025, then 1000 bytes of body with 25 of attribute
    sqs.send_message(QueueUrl=url, MessageBody="x" * 1024)
    with pytest.raises(ClientError) as body_too_long:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1025)
    with pytest.raises(ClientError) as attributes_too_long:
        sqs.send_message(
            QueueUrl=url,
            MessageBody="x" * 1000,
            # 4 (name) + 6 (type) + 15 (value) = 25 bytes
            MessageAttributes={"name": {"DataType": "String", "StringValue": "y" * 15}},
        )
    # Then only the first is accepted
    assert error_of(body_too_long)["Code"] == "InvalidParameterValue"
    assert error_of(attributes_too_long)["Code"] == "InvalidParameterValue"
    assert len(receive_one(sqs, url, MaxNumberOfMessages=10)["Body"]) == 1024


def test_one_mebibyte_body_is_accepted_on_a_default_queue_and_one_byte_more_is_not(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("big")
    largest = "é" * (1_048_576 // 2)  # 2 UTF-8 bytes each: the limit counts bytes
    sqs.send_message(QueueUrl=url, MessageBody=largest)
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1_048_577)
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"
    message = receive_one(sqs, url, MaxNumberOfMessages=10)
    assert message["Body"] == largest
    assert message["MD5OfBody"] == hashlib.md5(largest.encode()).hexdigest()


def test_delay_seconds_above_900_is_refused(sqs: Any, scratch_queue: str) -> None:
    url = scratch_queue
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="m", DelaySeconds=901)
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"


def test_message_group_id_is_accepted_on_a_standard_queue(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("fair")
    sqs.send_message(QueueUrl=url, MessageBody="tenant a", MessageGroupId="tenant-a")
    message = receive_one(sqs, url, AttributeNames=["All"])
    assert message["Attributes"]["MessageGroupId"] == "tenant-a"


# -- receive semantics ----------------------------------------------------------------------


def test_delayed_message_is_not_received_before_its_delay_and_a_long_poll_wakes_for_it(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message sent with a 1 s delay
    url = new_queue("delay")
    started = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    # When polled at once, and then with a long poll
    early = sqs.receive_message(QueueUrl=url)
    message = receive_one(sqs, url, WaitTimeSeconds=10)
    waited = time.monotonic() - started
    # Then the first sees nothing and the long poll returns as soon as the delay ends
    assert "Messages" not in early
    assert message["Body"] == "later"
    assert 0.9 <= waited < 3.0, waited


def test_queue_delay_applies_unless_the_message_sets_its_own(sqs: Any, new_queue: NewQueue) -> None:
    # Given a queue with a 1 s default delay
    url = new_queue("qdelay", DelaySeconds="1")
    started = time.monotonic()
    # When one message uses the default and one says DelaySeconds=0
    sqs.send_message(QueueUrl=url, MessageBody="default delay")
    sqs.send_message(QueueUrl=url, MessageBody="no delay", DelaySeconds=0)
    # Then only the undelayed one is there at once, the other after the queue's delay
    assert receive_one(sqs, url, MaxNumberOfMessages=10)["Body"] == "no delay"
    assert receive_one(sqs, url, WaitTimeSeconds=10)["Body"] == "default delay"
    assert time.monotonic() - started >= 0.9


@pytest.mark.parametrize("count", [0, 11])
def test_max_number_of_messages_outside_1_to_10_is_refused(
    sqs: Any, scratch_queue: str, count: int
) -> None:
    url = scratch_queue
    with pytest.raises(ClientError) as excinfo:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count)
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"


def test_receive_returns_at_most_max_number_of_messages(sqs: Any, new_queue: NewQueue) -> None:
    # Given twelve messages
    url = new_queue("maxten")
    for i in range(12):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    # When received ten at a time, then one at a time (the default)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    second = sqs.receive_message(QueueUrl=url)["Messages"]
    third = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    # Then every message is handed out exactly once
    assert (len(first), len(second), len(third)) == (10, 1, 1)
    bodies = [m["Body"] for m in first + second + third]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(12))


def test_a_message_visible_again_is_received_before_newer_ones(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message received with a 1 s visibility timeout, then two newer messages sent
    # while it is in flight (visible since before it is visible again)
    url = new_queue("oldestfirst")
    sqs.send_message(QueueUrl=url, MessageBody="old")
    assert receive_one(sqs, url, VisibilityTimeout=1)["Body"] == "old"
    sqs.send_message(QueueUrl=url, MessageBody="new-1")
    sqs.send_message(QueueUrl=url, MessageBody="new-2")
    time.sleep(1.5)
    # When received one at a time
    bodies = [receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"]) for _ in range(3)]
    # Then oldest first, as SQS serves them in practice
    assert [m["Body"] for m in bodies] == ["old", "new-1", "new-2"]
    assert bodies[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_receive_visibility_timeout_overrides_the_queue_default(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue with the default 30 s visibility timeout
    url = new_queue("visover")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    # When received with VisibilityTimeout=1
    first = receive_one(sqs, url, VisibilityTimeout=1)
    # Then it is hidden, and back after about a second rather than 30
    assert nothing_to_receive(sqs, url)
    again = receive_one(sqs, url, WaitTimeSeconds=5)
    assert again["MessageId"] == first["MessageId"]


def test_system_attributes_come_back_only_when_asked_for(
    sqs: Any, new_queue: NewQueue, protocol: str
) -> None:
    # Given a message
    url = new_queue("sysnames")
    before_ms = int(time.time() * 1000)
    sqs.send_message(QueueUrl=url, MessageBody="m")
    after_ms = int(time.time() * 1000)
    # When received without names, with All, and with one name
    none = receive_one(sqs, url, VisibilityTimeout=0)
    every = receive_one(sqs, url, VisibilityTimeout=0, AttributeNames=["All"])
    one = receive_one(sqs, url, VisibilityTimeout=0, AttributeNames=["SentTimestamp"])
    # Then attributes appear only when asked for, and timestamps are in milliseconds
    assert "Attributes" not in none
    assert set(every["Attributes"]) == {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
    }
    assert every["Attributes"]["ApproximateReceiveCount"] == "2"
    assert set(one["Attributes"]) == {"SentTimestamp"}
    assert before_ms - 1000 <= int(one["Attributes"]["SentTimestamp"]) <= after_ms + 1000
    if protocol == "json":  # the Query model predates MessageSystemAttributeNames
        newer = receive_one(
            sqs, url, VisibilityTimeout=0, MessageSystemAttributeNames=["ApproximateReceiveCount"]
        )
        assert newer["Attributes"] == {"ApproximateReceiveCount": "4"}


def test_approximate_first_receive_timestamp_stays_the_same_across_receives(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("firstrx")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = receive_one(sqs, url, VisibilityTimeout=0, AttributeNames=["All"])["Attributes"]
    time.sleep(0.05)
    second = receive_one(sqs, url, VisibilityTimeout=0, AttributeNames=["All"])["Attributes"]
    assert second["ApproximateFirstReceiveTimestamp"] == first["ApproximateFirstReceiveTimestamp"]
    assert int(first["ApproximateFirstReceiveTimestamp"]) >= int(first["SentTimestamp"])
    assert (first["ApproximateReceiveCount"], second["ApproximateReceiveCount"]) == ("1", "2")


def test_long_poll_returns_promptly_when_another_client_sends(
    sqs: Any, new_queue: NewQueue, gateway: GatewayProcess, protocol: str
) -> None:
    # Given a receive parked in a 20 s long poll on an empty queue that has seen traffic
    # (so the measurement leaves out the producer's first metadata lookup of a new topic)
    url = new_queue("wake")
    sender = json_client(gateway.endpoint) if protocol == "json" else query_client(gateway.endpoint)
    sender.send_message(QueueUrl=url, MessageBody="warm-up")
    warm_up = receive_one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=warm_up["ReceiptHandle"])
    outcome: dict[str, Any] = {}

    def park() -> None:
        outcome["response"] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)
        outcome["returned_at"] = time.monotonic()

    poller = threading.Thread(target=park)
    poller.start()
    time.sleep(1.0)  # let the receive park
    assert poller.is_alive()
    # When another client sends a message
    send_started = time.monotonic()
    sender.send_message(QueueUrl=url, MessageBody="wake up")
    send_answered = time.monotonic()
    poller.join(timeout=25)
    # Then the parked receive returns the message right away
    assert outcome["response"]["Messages"][0]["Body"] == "wake up"
    from_send_start_ms = (outcome["returned_at"] - send_started) * 1000
    from_send_answer_ms = (outcome["returned_at"] - send_answered) * 1000
    print(  # noqa: T201 - the latency is reported, not only asserted
        f"long-poll wake ({protocol}): {from_send_start_ms:.1f} ms after the send started, "
        f"{from_send_answer_ms:.1f} ms after it was answered"
    )
    assert from_send_start_ms < 1000


# -- receipt handles ------------------------------------------------------------------------


def test_every_receive_gives_a_new_handle_and_an_older_one_still_deletes(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message received twice
    url = new_queue("handles")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = receive_one(sqs, url, VisibilityTimeout=0)["ReceiptHandle"]
    second = receive_one(sqs, url, VisibilityTimeout=0)["ReceiptHandle"]
    # When the older handle deletes it, and then the newer one deletes it again
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second)
    # Then both deletes succeeded, the handles differ, and the message is gone
    assert first != second
    assert nothing_to_receive(sqs, url)


def test_deleting_twice_with_the_same_handle_succeeds(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("twice")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = receive_one(sqs, url)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)


def test_visibility_change_of_a_deleted_message_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("visdel")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = receive_one(sqs, url)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=10)
    error = error_of(excinfo)
    assert (error["Code"], error["Message"]) == (
        "InvalidParameterValue",
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: {NOT_AVAILABLE}",
    )


def test_visibility_change_with_a_garbage_handle_is_refused(sqs: Any, scratch_queue: str) -> None:
    url = scratch_queue
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="garbage", VisibilityTimeout=5)
    error = error_of(excinfo)
    assert error["Code"] == "ReceiptHandleIsInvalid"
    assert error["Message"] == 'The input receipt handle "garbage" is not a valid receipt handle.'


def test_visibility_change_to_zero_makes_the_message_receivable_at_once(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("viszero")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = receive_one(sqs, url, VisibilityTimeout=300)["ReceiptHandle"]
    assert nothing_to_receive(sqs, url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert receive_one(sqs, url)["Body"] == "m"


def test_visibility_change_applies_once_and_the_next_receive_uses_the_queue_timeout(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue with a 1 s visibility timeout and a received message made visible again
    url = new_queue("visonce", VisibilityTimeout="1")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = receive_one(sqs, url)["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    # When it is received again without a VisibilityTimeout
    receive_one(sqs, url)
    # Then the queue's 1 s applies again (not the 0 of the change)
    assert nothing_to_receive(sqs, url)
    receive_one(sqs, url, WaitTimeSeconds=5)


def test_visibility_change_after_the_lease_ended_hides_the_message_again(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message received with a 1 s lease that has ended, nobody receiving it since
    url = new_queue("visexpired")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = receive_one(sqs, url, VisibilityTimeout=1)["ReceiptHandle"]
    time.sleep(1.3)
    # When its visibility is changed with that handle (AWS accepts it)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=300)
    # Then it is hidden again
    assert nothing_to_receive(sqs, url)


def test_visibility_change_with_the_handle_of_an_earlier_receive_applies(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message received twice, the first time with visibility 0
    url = new_queue("visold")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = receive_one(sqs, url, VisibilityTimeout=0)["ReceiptHandle"]
    receive_one(sqs, url, VisibilityTimeout=300)
    assert nothing_to_receive(sqs, url)
    # When the first receive's handle sets its visibility to 0 (AWS accepts it)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=0)
    # Then the message is visible
    again = receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert again["Attributes"]["ApproximateReceiveCount"] == "3"


def test_delete_with_the_handle_of_an_earlier_receive_deletes_the_message(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a message received twice
    url = new_queue("delold")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = receive_one(sqs, url, VisibilityTimeout=0)["ReceiptHandle"]
    receive_one(sqs, url, VisibilityTimeout=0)
    # When deleted with the first receive's handle: it succeeds, and KQS does delete it
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first)
    # Then
    assert nothing_to_receive(sqs, url)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_visibility_beyond_12_hours_from_the_receive_is_refused(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a received message whose visibility was already extended once
    url = new_queue("vis12h")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = receive_one(sqs, url)["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=43_000)
    time.sleep(0.05)
    # When a change would end more than 12 h after the receive
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=43_200)
    # Then it is refused
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"
    assert "43200" in error_of(excinfo)["Message"]


# -- dead-letter queues ---------------------------------------------------------------------


def test_message_received_more_than_max_receive_count_moves_to_the_dead_letter_queue(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue whose RedrivePolicy sends messages to a DLQ after two receives
    dlq = new_queue("dlq")
    source = new_queue(
        "src",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 2}),
    )
    attributes: dict[str, dict[str, Any]] = {
        "kind": {"DataType": "String.custom", "StringValue": "order"},
        "raw": {"DataType": "Binary", "BinaryValue": base64.b64decode("AAEC")},
    }
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison", MessageAttributes=attributes)
    # When it is received twice (made visible at once each time) and then a third time
    sent_at = receive_one(sqs, source, VisibilityTimeout=0, AttributeNames=["SentTimestamp"])
    receive_one(sqs, source, VisibilityTimeout=0)
    third = sqs.receive_message(QueueUrl=source, VisibilityTimeout=0)
    # Then the third receive gets nothing: the message is in the DLQ, with the same id, body
    # and attributes, and the source queue's ARN
    assert "Messages" not in third
    moved = receive_one(
        sqs, dlq, WaitTimeSeconds=5, AttributeNames=["All"], MessageAttributeNames=["All"]
    )
    assert moved["MessageId"] == sent["MessageId"]
    assert moved["Body"] == "poison"
    assert moved["MessageAttributes"] == attributes
    assert moved["MD5OfMessageAttributes"] == attributes_md5(attributes)
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == arn_of(source)
    assert moved["Attributes"]["SentTimestamp"] == sent_at["Attributes"]["SentTimestamp"]
    # and its receive count carried over, as AWS records it: 2 in the source, 3 now
    assert moved["Attributes"]["ApproximateReceiveCount"] == "3"
    assert nothing_to_receive(sqs, source)


def test_receive_that_dead_letters_a_message_still_returns_the_next_receivable_one(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue that dead-letters after one receive, holding a message received once
    # (visible again, first in line) and a fresh one behind it
    dlq = new_queue("dlq")
    source = new_queue(
        "src",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 1}),
    )
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    receive_one(sqs, source, VisibilityTimeout=0)
    sqs.send_message(QueueUrl=source, MessageBody="fresh")
    # When one message is asked for, with a long poll
    started = time.monotonic()
    message = receive_one(sqs, source, MaxNumberOfMessages=1, WaitTimeSeconds=5)
    # Then the poison message went to the DLQ and the fresh one comes back at once
    assert message["Body"] == "fresh"
    assert time.monotonic() - started < 1.0
    assert receive_one(sqs, dlq)["Body"] == "poison"


def test_redrive_policy_naming_a_missing_queue_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    missing = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:no-such-dlq-{time.time_ns()}"
    with pytest.raises(ClientError) as excinfo:
        new_queue(
            "src", RedrivePolicy=json.dumps({"deadLetterTargetArn": missing, "maxReceiveCount": 2})
        )
    assert error_of(excinfo)["Code"] == "InvalidParameterValue"
