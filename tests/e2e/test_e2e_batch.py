"""Batch actions end to end, through both protocols on real Kafka: request-level errors fail the
whole request, per-entry problems land in `Failed` with HTTP 200."""

from __future__ import annotations

import hashlib
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.attribute_md5 import attributes_md5
from tests.support.harness import ACCOUNT_ID, GatewayProcess, NewQueue, signed_headers
from tests.support.prometheus_text import scrape

TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
NOT_AVAILABLE = "Message does not exist or is not available for visibility timeout change."


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> dict[str, Any]:
    error: dict[str, Any] = excinfo.value.response["Error"]
    return error


def status_of(response: dict[str, Any]) -> int:
    status: int = response["ResponseMetadata"]["HTTPStatusCode"]
    return status


def failed_by_id(response: dict[str, Any]) -> dict[str, dict[str, Any]]:
    # The Query protocol has no element for an empty list, so `Failed` may be absent.
    return {entry["Id"]: entry for entry in response.get("Failed", [])}


def successful_ids(response: dict[str, Any]) -> list[str]:
    return [entry["Id"] for entry in response.get("Successful", [])]


def receive_all(sqs: Any, url: str, expected: int, **kwargs: Any) -> list[dict[str, Any]]:
    """Receive until `expected` messages arrived (a short poll may return fewer)."""
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while len(messages) < expected and time.monotonic() < deadline:
        response = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, **kwargs
        )
        messages += response.get("Messages", [])
    return messages


# -- SendMessageBatch -----------------------------------------------------------------------


def test_send_batch_sends_every_entry_with_its_checksums(sqs: Any, new_queue: NewQueue) -> None:
    # Given a queue and three entries, with attributes of every type and a trace header
    url = new_queue("sendbatch")
    attributes: dict[str, dict[str, Any]] = {
        "s": {"DataType": "String.custom", "StringValue": "x\r\ny"},
        "n": {"DataType": "Number.int", "StringValue": "7"},
        "b": {"DataType": "Binary.gif", "BinaryValue": b"\x00GIF"},
    }
    entries: list[dict[str, Any]] = [
        {"Id": "plain", "MessageBody": "one"},
        {"Id": "with-attrs_2", "MessageBody": "two", "MessageAttributes": attributes},
        {
            "Id": "traced",
            "MessageBody": "three",
            "MessageSystemAttributes": {
                "AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}
            },
        },
    ]
    # When they are sent in one batch
    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    # Then every entry succeeded, in order, with the MD5s of what it sent
    assert failed_by_id(response) == {}
    assert successful_ids(response) == ["plain", "with-attrs_2", "traced"]
    results = {entry["Id"]: entry for entry in response["Successful"]}
    for entry in entries:
        result = results[entry["Id"]]
        assert result["MD5OfMessageBody"] == hashlib.md5(entry["MessageBody"].encode()).hexdigest()
    assert "MD5OfMessageAttributes" not in results["plain"]
    assert results["with-attrs_2"]["MD5OfMessageAttributes"] == attributes_md5(attributes)
    assert results["traced"]["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"
    # And the messages are receivable at once, with their ids, bodies and attributes
    received = receive_all(
        sqs, url, 3, MessageAttributeNames=["All"], AttributeNames=["AWSTraceHeader"]
    )
    by_body = {m["Body"]: m for m in received}
    assert {m["MessageId"] for m in received} == {r["MessageId"] for r in results.values()}
    assert by_body["two"]["MessageAttributes"] == attributes
    assert by_body["two"]["MD5OfMessageAttributes"] == attributes_md5(attributes)
    assert by_body["three"]["Attributes"] == {"AWSTraceHeader": TRACE_HEADER}


def test_send_batch_of_ten_is_receivable_as_soon_as_it_is_answered(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("ten")
    entries = [{"Id": f"m{i}", "MessageBody": f"body {i}"} for i in range(10)]
    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert len(successful_ids(response)) == 10
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in first) == sorted(e["MessageBody"] for e in entries)


def test_send_batch_reports_bad_entries_and_sends_the_good_ones(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue limited to 1024-byte messages and a batch mixing good and bad entries
    url = new_queue("mixed", MaximumMessageSize="1024")
    entries = [
        {"Id": "good", "MessageBody": "fine"},
        {"Id": "bad_chars", "MessageBody": "nul\u0000"},
        {"Id": "too_late", "MessageBody": "x", "DelaySeconds": 901},
        {
            "Id": "bad_attr",
            "MessageBody": "x",
            "MessageAttributes": {"AWS.reserved": {"DataType": "String", "StringValue": "v"}},
        },
        {"Id": "too_big", "MessageBody": "x" * 1025},
        {"Id": "also_good", "MessageBody": "fine too", "DelaySeconds": 0},
    ]
    # When the batch is sent
    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    # Then the request succeeds, the good entries are sent and each bad one is reported
    assert status_of(response) == 200
    assert successful_ids(response) == ["good", "also_good"]
    failed = failed_by_id(response)
    assert {entry_id: entry["Code"] for entry_id, entry in failed.items()} == {
        "bad_chars": "InvalidMessageContents",
        "too_late": "InvalidParameterValue",
        "bad_attr": "InvalidParameterValue",
        "too_big": "InvalidParameterValue",
    }
    assert all(entry["SenderFault"] is True for entry in failed.values())
    assert all(entry["Message"] for entry in failed.values())
    bodies = sorted(m["Body"] for m in receive_all(sqs, url, 2))
    assert bodies == ["fine", "fine too"]


def test_send_batch_entry_delay_applies_per_entry(sqs: Any, new_queue: NewQueue) -> None:
    # 3 s, not 1: on a loaded machine the first receive once answered more than 1 s after
    # the send began, when the delayed entry was rightly visible already.
    delay_s = 3
    url = new_queue("batchdelay")
    began = time.monotonic()
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "now", "MessageBody": "now"},
            {"Id": "later", "MessageBody": "later", "DelaySeconds": delay_s},
        ],
    )
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert time.monotonic() - began < delay_s, "too slow to tell: the delay had ended"
    assert [m["Body"] for m in first] == ["now"]
    second = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=delay_s + 5)["Messages"]
    assert [m["Body"] for m in second] == ["later"]
    assert time.monotonic() - began >= delay_s  # not before its delay ended


def _entries(count: int, body: str = "x") -> list[dict[str, Any]]:
    return [{"Id": f"e{i}", "MessageBody": body} for i in range(count)]


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        pytest.param([], "AWS.SimpleQueueService.EmptyBatchRequest", id="empty"),
        pytest.param(
            _entries(11), "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", id="eleven"
        ),
        pytest.param(
            [{"Id": "same", "MessageBody": "a"}, {"Id": "same", "MessageBody": "b"}],
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            id="repeated-id",
        ),
        pytest.param(
            [{"Id": "bad id!", "MessageBody": "a"}],
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            id="bad-id-characters",
        ),
        pytest.param(
            [{"Id": "i" * 81, "MessageBody": "a"}],
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            id="id-too-long",
        ),
        pytest.param(
            [{"Id": "a", "MessageBody": "x" * 600_000}, {"Id": "b", "MessageBody": "y" * 448_577}],
            "AWS.SimpleQueueService.BatchRequestTooLong",
            id="over-1-mib-in-total",
        ),
        pytest.param(
            [
                {"Id": "a", "MessageBody": "x" * 600_000},
                {
                    "Id": "b",
                    "MessageBody": "y" * 448_570,
                    # 1 + 6 + 1 bytes of attribute tip the batch over
                    "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
                },
            ],
            "AWS.SimpleQueueService.BatchRequestTooLong",
            id="over-1-mib-with-attributes",
        ),
    ],
)
def test_send_batch_request_level_errors_fail_the_whole_request(
    sqs: Any, scratch_queue: str, entries: list[dict[str, Any]], code: str
) -> None:
    # When a batch breaks a request-level rule
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message_batch(QueueUrl=scratch_queue, Entries=entries)
    # Then the whole request fails with the batch error, and nothing was sent
    assert error_of(excinfo)["Code"] == code
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Messages" not in sqs.receive_message(QueueUrl=scratch_queue)


def test_send_batch_of_exactly_one_mebibyte_is_accepted(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("fullbatch")
    entries = [
        {"Id": "a", "MessageBody": "x" * 600_000},
        {"Id": "b", "MessageBody": "y" * 448_576},
    ]
    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert successful_ids(response) == ["a", "b"]


def test_batch_on_a_missing_queue_fails_the_whole_request(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message_batch(
            QueueUrl=f"{ACCOUNT_ID}/missing-{time.time_ns()}", Entries=_entries(1)
        )
    assert error_of(excinfo)["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


# -- DeleteMessageBatch ---------------------------------------------------------------------


def test_delete_batch_deletes_good_handles_and_reports_bad_ones(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given two received messages
    url = new_queue("delbatch")
    sqs.send_message_batch(QueueUrl=url, Entries=_entries(2))
    handles = [m["ReceiptHandle"] for m in receive_all(sqs, url, 2, VisibilityTimeout=0)]
    # When a batch deletes both and also names a garbage handle
    response = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "first", "ReceiptHandle": handles[0]},
            {"Id": "garbage", "ReceiptHandle": "not-a-handle"},
            {"Id": "second", "ReceiptHandle": handles[1]},
        ],
    )
    # Then the good ones are deleted and the garbage one fails alone
    assert status_of(response) == 200
    assert successful_ids(response) == ["first", "second"]
    failed = failed_by_id(response)
    assert failed["garbage"]["Code"] == "ReceiptHandleIsInvalid"
    assert failed["garbage"]["SenderFault"] is True
    assert (
        failed["garbage"]["Message"]
        == 'The input receipt handle "not-a-handle" is not a valid receipt handle.'
    )
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)


def test_delete_batch_with_an_already_deleted_message_succeeds(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("deltwice")
    sqs.send_message(QueueUrl=url, MessageBody="m")
    handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    response = sqs.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": "again", "ReceiptHandle": handle}]
    )
    assert successful_ids(response) == ["again"]


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        pytest.param([], "AWS.SimpleQueueService.EmptyBatchRequest", id="empty"),
        pytest.param(
            [{"Id": f"e{i}", "ReceiptHandle": "h"} for i in range(11)],
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            id="eleven",
        ),
        pytest.param(
            [{"Id": "same", "ReceiptHandle": "a"}, {"Id": "same", "ReceiptHandle": "b"}],
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            id="repeated-id",
        ),
        pytest.param(
            [{"Id": "no.dots", "ReceiptHandle": "a"}],
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            id="bad-id",
        ),
    ],
)
def test_delete_batch_request_level_errors_fail_the_whole_request(
    sqs: Any, scratch_queue: str, entries: list[dict[str, Any]], code: str
) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.delete_message_batch(QueueUrl=scratch_queue, Entries=entries)
    assert error_of(excinfo)["Code"] == code


# -- ChangeMessageVisibilityBatch -----------------------------------------------------------


def test_change_visibility_batch_changes_good_entries_and_reports_bad_ones(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given two messages in flight for 5 minutes, one of which is then deleted
    url = new_queue("visbatch")
    sqs.send_message_batch(QueueUrl=url, Entries=_entries(2))
    received = receive_all(sqs, url, 2, VisibilityTimeout=300)
    kept, deleted = received[0], received[1]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=deleted["ReceiptHandle"])
    # When a batch makes the kept one visible, and names the deleted one and a garbage handle
    response = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "kept", "ReceiptHandle": kept["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "deleted", "ReceiptHandle": deleted["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "garbage", "ReceiptHandle": "garbage", "VisibilityTimeout": 0},
            {
                "Id": "too_long",
                "ReceiptHandle": kept["ReceiptHandle"],
                "VisibilityTimeout": 43_201,
            },
        ],
    )
    # Then only the kept one changed, and each other entry failed with its own reason
    assert status_of(response) == 200
    assert successful_ids(response) == ["kept"]
    failed = failed_by_id(response)
    assert {entry_id: entry["Code"] for entry_id, entry in failed.items()} == {
        "deleted": "InvalidParameterValue",
        "garbage": "ReceiptHandleIsInvalid",
        "too_long": "InvalidParameterValue",
    }
    assert failed["deleted"]["Message"] == (
        f"Value {deleted['ReceiptHandle']} for parameter ReceiptHandle is invalid. "
        f"Reason: {NOT_AVAILABLE}"
    )
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["MessageId"] for m in again] == [kept["MessageId"]]


def test_change_visibility_batch_with_too_many_entries_fails_the_whole_request(
    sqs: Any, scratch_queue: str
) -> None:
    entries = [{"Id": f"e{i}", "ReceiptHandle": "h", "VisibilityTimeout": 0} for i in range(11)]
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility_batch(QueueUrl=scratch_queue, Entries=entries)
    assert error_of(excinfo)["Code"] == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"


# -- the Query wire format ------------------------------------------------------------------


def _query_post(url: str, params: dict[str, str]) -> tuple[int, str]:
    body = urllib.parse.urlencode({**params, "Version": "2012-11-05"}).encode()
    headers = signed_headers(url, body, {"Content-Type": "application/x-www-form-urlencoded"})
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_query_batch_result_uses_the_result_entry_and_error_entry_elements(
    new_queue: NewQueue, protocol: str
) -> None:
    if protocol != "query":
        pytest.skip("a raw Query request: once is enough")
    # Given a queue, and a raw Query SendMessageBatch with an attribute and a bad entry
    url = new_queue("rawquery")
    status, xml = _query_post(
        url,
        {
            "Action": "SendMessageBatch",
            "SendMessageBatchRequestEntry.1.Id": "ok",
            "SendMessageBatchRequestEntry.1.MessageBody": "hello",
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name": "color",
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType": "String",
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": "red",
            "SendMessageBatchRequestEntry.2.Id": "bad",
            "SendMessageBatchRequestEntry.2.MessageBody": "\uffff",
        },
    )
    # Then the XML has one result entry and one error entry, as SQS writes them
    expected_md5 = attributes_md5({"color": {"DataType": "String", "StringValue": "red"}})
    assert status == 200, xml
    assert "<SendMessageBatchResult><SendMessageBatchResultEntry><Id>ok</Id>" in xml
    assert f"<MD5OfMessageAttributes>{expected_md5}</MD5OfMessageAttributes>" in xml
    assert (
        "<BatchResultErrorEntry><Id>bad</Id><SenderFault>true</SenderFault>"
        "<Code>InvalidMessageContents</Code>" in xml
    )


def test_a_delete_batch_shares_one_lease_store_fsync(
    sqs: Any, new_queue: NewQueue, gateway: GatewayProcess
) -> None:
    # Given ten messages in flight
    url = new_queue("group-sync")
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
    )
    taken: list[dict[str, Any]] = []
    while len(taken) < 10:
        taken += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60, WaitTimeSeconds=1
        ).get("Messages", [])
    before = scrape(gateway.endpoint)

    # When one DeleteMessageBatch deletes them all
    response = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(taken)],
    )

    # Then all ten were answered after a single fsync of the lease store, which the batch
    # waited for once (its entries are deleted together, in one write)
    after = scrape(gateway.endpoint)
    assert len(response["Successful"]) == 10
    delta = {
        name: after.value(name) - before.value(name)
        for name in ("kqs_lease_store_sync_waiters_total", "kqs_lease_store_syncs_total")
    }
    assert delta == {"kqs_lease_store_sync_waiters_total": 1, "kqs_lease_store_syncs_total": 1}
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
