"""Hostile and oversized input against the real gateway (issue 14, item 6).

A few thousand signed, malformed requests over both protocols - junk and truncated JSON,
wrong types, huge values, broken batches, invalid UTF-8, unknown actions, missing queues -
must each get a 4xx answer within a few seconds, and must not touch a message that waits in
another queue. Every request is built to be invalid on purpose (at least one mutation no SQS
server may accept), so any 2xx is a validation gap and any 5xx a crash. The generator is
seeded: a failure names the request that caused it and reproduces.
"""

from __future__ import annotations

import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from gateway.common import limits
from gateway.http.dispatch import ACTIONS
from tests.support.harness import GatewayProcess, json_client, signed_headers

REQUESTS_PER_PROTOCOL = 1500
SEED = 14
JSON_HEADERS = {"Content-Type": "application/x-amz-json-1.0"}
FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True)
class FuzzRequest:
    label: str  # what makes it invalid, for the failure message
    url: str
    body: bytes
    headers: dict[str, str]


def _send(request: FuzzRequest) -> tuple[FuzzRequest, int, float]:
    headers = signed_headers(request.url, request.body, request.headers)
    http = urllib.request.Request(request.url, data=request.body, headers=headers, method="POST")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(http, timeout=15) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        error.read()
        status = error.code
    return request, status, time.monotonic() - started


# -- the generator: every request carries at least one mutation SQS refuses ------------------

_HUGE = "x" * (limits.MAX_MESSAGE_BYTES + 1)
_INVALID_CHARS = ["\u0000", "\u0008", "\ufffe", "a\u001fb"]
_WRONG_TYPES: list[Any] = [5, -1, 1.5, True, None, [], {}, ["a"], {"a": 1}, 10**40]


class Fuzzer:
    def __init__(self, rng: random.Random, queue_url: str, endpoint: str) -> None:
        self.rng = rng
        self.queue_url = queue_url
        self.endpoint = endpoint
        self.missing_url = queue_url.rsplit("/", 1)[0] + "/no-such-queue-fuzz"
        # Query carries every value as text, so a JSON type error is no error there.
        self.query = False

    def pick(self, items: list[Any]) -> Any:
        return items[self.rng.randrange(len(items))]

    def junk(self, size: int) -> str:
        alphabet = "abcXYZ019_-.:/{}[]\"'\\%&=+ \n\t\u00e9\u4e2d\U0001f600"
        return "".join(self.rng.choice(alphabet) for _ in range(size))

    # Each mutation returns (label, action, params) with params in the JSON 1.0 shape.
    def mutations(self) -> list[Callable[[], tuple[str, str, dict[str, Any]]]]:
        return [
            self.unknown_action,
            self.missing_queue,
            self.queue_url_wrong_type,
            self.body_wrong_type,
            self.body_invalid_characters,
            self.body_too_large,
            self.body_empty,
            self.receive_out_of_range,
            self.visibility_out_of_range,
            self.delay_out_of_range,
            self.bad_receipt_handle,
            self.broken_batch,
            self.bad_message_attributes,
            self.bad_queue_attributes,
            self.bad_queue_name,
            self.bad_tags,
        ]

    def unknown_action(self) -> tuple[str, str, dict[str, Any]]:
        ascii_junk = self.junk(30).encode("ascii", "ignore").decode().replace("\n", "")
        action = self.pick(["", "Nope", "sendmessage", "SendMessage ", ascii_junk, "A" * 5000])
        return "unknown action", action, {"QueueUrl": self.queue_url}

    def missing_queue(self) -> tuple[str, str, dict[str, Any]]:
        action = self.pick(
            ["SendMessage", "ReceiveMessage", "GetQueueAttributes", "PurgeQueue", "TagQueue"]
        )
        url = self.pick([self.missing_url, self.junk(40), "/", "http://h/1/2/3/"])
        return "missing queue", action, {"QueueUrl": url, "MessageBody": "m", "Tags": {"a": "b"}}

    def queue_url_wrong_type(self) -> tuple[str, str, dict[str, Any]]:
        if self.query:  # as text, `5` or `True` is a fine queue name
            return self.missing_queue()
        action = self.pick(sorted(set(ACTIONS) - {"ListQueues"}))  # the one without a queue
        value = self.pick([v for v in _WRONG_TYPES if v is not None and v != []])
        return "QueueUrl of a wrong type", action, {"QueueUrl": value, "QueueName": value}

    def body_wrong_type(self) -> tuple[str, str, dict[str, Any]]:
        if self.query:
            return self.body_invalid_characters()
        value = self.pick([v for v in _WRONG_TYPES if v is not None])
        return "MessageBody of a wrong type", "SendMessage", self.on_queue(MessageBody=value)

    def body_invalid_characters(self) -> tuple[str, str, dict[str, Any]]:
        body = self.junk(20) + self.pick(_INVALID_CHARS) + self.junk(5)
        return "invalid characters", "SendMessage", self.on_queue(MessageBody=body)

    def body_too_large(self) -> tuple[str, str, dict[str, Any]]:
        return "body over 1 MiB", "SendMessage", self.on_queue(MessageBody=_HUGE)

    def body_empty(self) -> tuple[str, str, dict[str, Any]]:
        return "empty body", "SendMessage", self.on_queue(MessageBody="")

    def receive_out_of_range(self) -> tuple[str, str, dict[str, Any]]:
        name, value = self.pick(
            [
                ("MaxNumberOfMessages", self.pick([0, 11, -5, 10**30, "ten", 2.5, True])),
                ("WaitTimeSeconds", self.pick([-1, 21, 10**30, "x", 0.5])),
                ("VisibilityTimeout", self.pick([-1, 43_201, 10**30, "x"])),
                ("AttributeNames", self.pick(["All", 5, {"a": "b"}])),
                ("MessageAttributeNames", self.pick([7, {"x": 1}])),
            ]
        )
        return f"ReceiveMessage {name}={value!r}", "ReceiveMessage", self.on_queue(**{name: value})

    def visibility_out_of_range(self) -> tuple[str, str, dict[str, Any]]:
        value = self.pick([-1, 43_201, 10**20, "soon", None, [0]])
        return (
            f"VisibilityTimeout={value!r}",
            "ChangeMessageVisibility",
            self.on_queue(ReceiptHandle=self.junk(30), VisibilityTimeout=value),
        )

    def delay_out_of_range(self) -> tuple[str, str, dict[str, Any]]:
        value = self.pick([-1, 901, 10**25, "later", 3.5, False])
        return (
            f"DelaySeconds={value!r}",
            "SendMessage",
            self.on_queue(MessageBody="m", DelaySeconds=value),
        )

    def bad_receipt_handle(self) -> tuple[str, str, dict[str, Any]]:
        handle = self.pick(
            ["", self.junk(50), "AQ" * 500, self.junk(3000), "=" * 40, "\u0000", 17, {"a": 1}]
        )
        action = self.pick(["DeleteMessage", "ChangeMessageVisibility"])
        return (
            f"receipt handle {str(handle)[:20]!r}",
            action,
            self.on_queue(ReceiptHandle=handle, VisibilityTimeout=0),
        )

    def broken_batch(self) -> tuple[str, str, dict[str, Any]]:
        action = self.pick(
            ["SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"]
        )
        good = {"Id": "a", "MessageBody": "m", "ReceiptHandle": "h", "VisibilityTimeout": 0}
        entries = self.pick(
            [
                [],
                "entries",
                [1, 2],
                [None],
                [good] * 2,  # ids not distinct
                [{**good, "Id": f"e{i}"} for i in range(11)],
                [{**good, "Id": ""}],
                [{**good, "Id": "bad id!"}],
                [{**good, "Id": "x" * 81}],
                [{"MessageBody": "no id"}],
                *([] if self.query else [[{**good, "Id": 5}]]),
            ]
        )
        if action == "SendMessageBatch" and self.rng.random() < 0.2:
            entries = [{**good, "Id": f"e{i}", "MessageBody": "y" * 120_000} for i in range(10)]
        return f"broken batch {str(entries)[:40]}", action, self.on_queue(Entries=entries)

    def bad_message_attributes(self) -> tuple[str, str, dict[str, Any]]:
        attributes = self.pick(
            [
                "attrs",
                {"a": "b"},
                {"": {"DataType": "String", "StringValue": "v"}},
                {"AWS.x": {"DataType": "String", "StringValue": "v"}},
                {"a b": {"DataType": "String", "StringValue": "v"}},
                {"n": {"DataType": "Number", "StringValue": "NaN"}},
                {"n": {"DataType": "Number", "StringValue": "1" * 40}},
                {"s": {"DataType": "String", "StringValue": ""}},
                {"s": {"DataType": "Nope", "StringValue": "v"}},
                {"s": {"DataType": 5, "StringValue": "v"}},
                {"b": {"DataType": "Binary", "BinaryValue": "!!not base64!!"}},
                {f"k{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)},
                {"s": {"DataType": "String", "StringValue": "bad\u0000"}},
            ]
        )
        return (
            f"message attributes {str(attributes)[:40]}",
            "SendMessage",
            self.on_queue(MessageBody="m", MessageAttributes=attributes),
        )

    def bad_queue_attributes(self) -> tuple[str, str, dict[str, Any]]:
        attributes = self.pick(
            [
                {"VisibilityTimeout": "-1"},
                {"VisibilityTimeout": "x"},
                {"DelaySeconds": "901"},
                {"MessageRetentionPeriod": "59"},
                {"MaximumMessageSize": "10"},
                {"Nope": "1"},
                {"RedrivePolicy": "{not json"},
                {
                    "RedrivePolicy": json.dumps(
                        {"deadLetterTargetArn": "arn:x", "maxReceiveCount": 0}
                    )
                },
                {"Policy": "{"},
                {"FifoQueue": "true"},
                *([] if self.query else [{"VisibilityTimeout": 5.5}]),
                "attributes",
            ]
        )
        action = self.pick(["SetQueueAttributes", "CreateQueue"])
        params = self.on_queue(Attributes=attributes, QueueName=f"fz-{self.rng.randrange(10**9)}")
        return f"queue attributes {str(attributes)[:40]}", action, params

    def bad_queue_name(self) -> tuple[str, str, dict[str, Any]]:
        name = self.pick(["", "a" * 81, "has space", "dot.name", "é", "\u0000", self.junk(90)])
        return f"queue name {name[:20]!r}", "CreateQueue", {"QueueName": name}

    def bad_tags(self) -> tuple[str, str, dict[str, Any]]:
        tags = self.pick(
            [
                {},
                {"k" * 129: "v"},
                {"k": "v" * 257},
                {f"k{i}": "v" for i in range(51)},
                "tags",
            ]
        )
        return f"tags {str(tags)[:30]}", "TagQueue", self.on_queue(Tags=tags)

    def on_queue(self, **params: Any) -> dict[str, Any]:
        return {"QueueUrl": self.queue_url, **params}

    # -- wire encodings -------------------------------------------------------------------

    def json_request(self) -> FuzzRequest:
        self.query = False
        roll = self.rng.random()
        target = {"X-Amz-Target": f"AmazonSQS.{self.pick(sorted(ACTIONS))}"}
        if roll < 0.15:  # a body that is not JSON at all
            body = self.pick(
                [
                    b"{",
                    b'{"QueueUrl": ',
                    b"\xff\xfe\xfd",
                    b'{"QueueUrl": "\xff"}',
                    b"[" * 50_000,
                    b"null",
                    b"[]",
                    b'"string"',
                    b"12",
                    self.junk(200).encode(),
                    bytes(self.rng.randrange(256) for _ in range(64)),
                ]
            )
            return FuzzRequest(
                f"json junk {body[:20]!r}", self.endpoint, body, {**JSON_HEADERS, **target}
            )
        label, action, params = self.pick(self.mutations())()
        body = json.dumps(params).encode()
        if self.rng.random() < 0.1:  # a lone surrogate escape inside some string
            body = body.replace(b'"m"', b'"\\ud800"', 1) if b'"m"' in body else body
        headers = {**JSON_HEADERS, "X-Amz-Target": f"AmazonSQS.{action}"}
        return FuzzRequest(f"json {action}: {label}", self.endpoint, body, headers)

    def query_request(self) -> FuzzRequest:
        self.query = True
        roll = self.rng.random()
        if roll < 0.15:  # malformed form bodies
            body = self.pick(
                [
                    b"Action=SendMessage&MessageBody=%ff%fe&QueueUrl=" + self.missing_url.encode(),
                    b"Action=SendMessage&MessageBody=\xff\xfe",
                    b"Action=ReceiveMessage&QueueUrl=%%%",
                    b"Action",
                    b"=&&&==",
                    b"Action=SendMessageBatch&SendMessageBatchRequestEntry.99999999999999999999.Id=a",
                    b"Action=SendMessageBatch&SendMessageBatchRequestEntry.x.Id=a",
                    b"Action=DeleteMessageBatch&DeleteMessageBatchRequestEntry.1=flat",
                    b"Action=SendMessage&MessageAttribute.1.Name=a&MessageAttribute.1.Value=flat",
                    b"Action=TagQueue&Tag.1.Key=only-key",
                    bytes(self.rng.randrange(256) for _ in range(80)),
                ]
            )
            return FuzzRequest(f"form junk {body[:30]!r}", self.endpoint, body, FORM_HEADERS)
        label, action, params = self.pick(self.mutations())()
        flat = _flatten(params)
        flat["Action"] = action
        body = urllib.parse.urlencode(flat).encode()
        url = self.endpoint
        if self.rng.random() < 0.3 and isinstance(params.get("QueueUrl"), str):
            url = self.queue_url  # the queue URL as the endpoint
        return FuzzRequest(f"query {action}: {label}", url, body, FORM_HEADERS)


_QUERY_ENTRY = {
    "SendMessageBatch": "SendMessageBatchRequestEntry",
    "DeleteMessageBatch": "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchRequestEntry",
}


def _flatten(params: dict[str, Any]) -> dict[str, str]:
    """The Query encoding of JSON-shaped parameters, wrong types and all (as text)."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        if key == "Entries" and isinstance(value, list):
            for i, entry in enumerate(value, 1):
                if isinstance(entry, dict):
                    for field, item in entry.items():
                        flat[f"SendMessageBatchRequestEntry.{i}.{field}"] = str(item)
                else:
                    flat[f"SendMessageBatchRequestEntry.{i}"] = str(entry)
            if not value:
                flat["Entries"] = ""
        elif key in ("MessageAttributes", "Attributes", "Tags") and isinstance(value, dict):
            member = {"MessageAttributes": "MessageAttribute", "Attributes": "Attribute"}.get(
                key, "Tag"
            )
            name_field = "Key" if key == "Tags" else "Name"
            for i, (name, item) in enumerate(value.items(), 1):
                flat[f"{member}.{i}.{name_field}"] = name
                if isinstance(item, dict):
                    for field, inner in item.items():
                        flat[f"{member}.{i}.Value.{field}"] = str(inner)
                else:
                    flat[f"{member}.{i}.Value"] = str(item)
            if not value:
                flat[key] = ""
        elif isinstance(value, list):
            singular = key[:-1] if key.endswith("s") else key
            for i, item in enumerate(value, 1):
                flat[f"{singular}.{i}"] = str(item)
        elif value is None:
            continue
        else:
            flat[key] = "true" if value is True else "false" if value is False else str(value)
    return flat


# -- the tests ---------------------------------------------------------------------------------


def _requests(fuzzer: Fuzzer) -> list[FuzzRequest]:
    requests = [fuzzer.json_request() for _ in range(REQUESTS_PER_PROTOCOL)]
    requests += [fuzzer.query_request() for _ in range(REQUESTS_PER_PROTOCOL)]
    fuzzer.rng.shuffle(requests)
    return requests


def test_thousands_of_malformed_requests_get_4xx_and_leave_other_queues_alone(
    gateway: GatewayProcess,
) -> None:
    # Given a message waiting in a bystander queue, and a queue the fuzzer aims at (both
    # protocols are in the one request stream, so the test runs once)
    sqs = json_client(gateway.endpoint)
    suffix = uuid.uuid4().hex[:12]
    bystander = sqs.create_queue(QueueName=f"bystander-{suffix}")["QueueUrl"]
    sent = sqs.send_message(
        QueueUrl=bystander,
        MessageBody="untouched",
        MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}},
    )
    target = sqs.create_queue(QueueName=f"fuzzed-{suffix}")["QueueUrl"]
    log_offset = gateway.log_path.stat().st_size
    fuzzer = Fuzzer(random.Random(SEED), target, gateway.endpoint)
    # When thousands of signed, malformed requests arrive from eight clients at once
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(_send, _requests(fuzzer)))
    elapsed = time.monotonic() - started
    # Then every one got a 4xx, none took long, and the gateway logged no crash
    wrong = [(r.label, status) for r, status, _ in outcomes if not 400 <= status < 500]
    assert not wrong, f"{len(wrong)} requests not answered 4xx, e.g. {wrong[:10]}"
    slowest = max(outcomes, key=lambda outcome: outcome[2])
    assert slowest[2] < 10, f"{slowest[0].label} took {slowest[2]:.1f}s"
    new_log = gateway.log_path.read_bytes()[log_offset:].decode(errors="replace")
    assert "Traceback" not in new_log
    assert '"level": "error"' not in new_log
    assert elapsed < 45, f"{len(outcomes)} requests took {elapsed:.0f}s"
    # And the bystander's message is there, unchanged and never received
    attributes = sqs.get_queue_attributes(QueueUrl=bystander, AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "1"
    (message,) = sqs.receive_message(
        QueueUrl=bystander,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["ApproximateReceiveCount"],
        WaitTimeSeconds=5,
    )["Messages"]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "untouched"
    assert message["MessageAttributes"] == {"k": {"DataType": "String", "StringValue": "v"}}
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    # And the fuzzed queue received nothing either
    target_attributes = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["All"])
    assert target_attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_body_over_the_request_limit_is_refused_with_a_4xx_naming_the_limit(
    gateway: GatewayProcess, scratch_queue: str, protocol: str
) -> None:
    # Given a 20 MiB body
    size = 20 * 1024 * 1024
    if protocol == "json":
        body = json.dumps({"QueueUrl": scratch_queue, "MessageBody": "x" * size}).encode()
        headers = {**JSON_HEADERS, "X-Amz-Target": "AmazonSQS.SendMessage"}
    else:
        body = b"Action=SendMessage&MessageBody=" + b"x" * size
        headers = FORM_HEADERS
    # When it is sent
    request = urllib.request.Request(
        gateway.endpoint,
        data=body,
        headers=signed_headers(gateway.endpoint, body, headers),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request, timeout=30)
    # Then it is 413 RequestEntityTooLarge, naming the limit, never a 500
    answer = excinfo.value.read().decode()
    assert excinfo.value.code == 413
    assert "RequestEntityTooLarge" in answer
    assert str(limits.MAX_REQUEST_BYTES) in answer


def test_a_client_that_disconnects_mid_request_is_an_info_line(gateway: GatewayProcess) -> None:
    # Given a request that announces a body longer than what it sends
    log_offset = gateway.log_path.stat().st_size
    split = urlsplit(gateway.endpoint)
    assert split.hostname is not None and split.port is not None
    with socket.create_connection((split.hostname, split.port), timeout=5) as connection:
        connection.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
            b'X-Amz-Target: AmazonSQS.ListQueues\r\nContent-Length: 100000\r\n\r\n{"Queue'
        )
        time.sleep(0.2)
    # When it hangs up, then the gateway logs one info line and no traceback
    deadline = time.monotonic() + 10
    new_log = ""
    while time.monotonic() < deadline and "client disconnected" not in new_log:
        time.sleep(0.1)
        new_log = gateway.log_path.read_bytes()[log_offset:].decode(errors="replace")
    lines = [json.loads(line) for line in new_log.splitlines() if line.startswith("{")]
    gone = [line for line in lines if line["msg"] == "client disconnected mid-request"]
    assert [line["level"] for line in gone] == ["info"]
    assert "Traceback" not in new_log
    assert not [line for line in lines if line["level"] in ("error", "critical")]
    # And the gateway still answers
    with urllib.request.urlopen(f"{gateway.endpoint}/health", timeout=5) as response:
        assert response.status == 200
