"""Signed SQS requests as raw HTTP/1.1 bytes, in both wire protocols, and their answers.

Requests are signed with botocore's SigV4Auth (access key `test`, us-east-1), so the gateway
verifies real signatures; the headers are those an SDK sends. Signing happens before the
timed loop: the benchmark measures only the gateway.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HOST = "127.0.0.1:9324"
REGION = "us-east-1"
PROTOCOLS = ("json", "query")
QUERY_VERSION = "2012-11-05"
_SIGNER = SigV4Auth(Credentials("test", "test"), "sqs", REGION)
_USER_AGENT = "Boto3/1.44.5 md/Botocore#1.44.5 ua/2.1 os/linux lang/python#3.11 (kqs micro)"
# Batch request entries, in the Query protocol's spelling (the JSON protocol says `Entries`).
_QUERY_ENTRY = {
    "SendMessageBatch": "SendMessageBatchRequestEntry",
    "DeleteMessageBatch": "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchRequestEntry",
}


def _query_params(action: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("Action", action), ("Version", QUERY_VERSION)]
    for name, value in params.items():
        if name == "Entries":
            for i, entry in enumerate(value, start=1):
                out += [(f"{_QUERY_ENTRY[action]}.{i}.{k}", str(v)) for k, v in entry.items()]
        else:
            out.append((name, str(value)))
    return out


def signed(protocol: str, action: str, params: dict[str, Any]) -> bytes:
    """The bytes an SDK would put on the wire for `action` with `params` (JSON shapes)."""
    if protocol == "json":
        body = json.dumps(params, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"AmazonSQS.{action}",
            "x-amzn-query-mode": "true",
        }
    elif protocol == "query":
        body = urlencode(_query_params(action, params)).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    else:
        raise ValueError(protocol)
    headers |= {
        "User-Agent": _USER_AGENT,
        "amz-sdk-invocation-id": str(uuid.uuid4()),
        "amz-sdk-request": "attempt=1",
    }
    request = AWSRequest(method="POST", url=f"http://{HOST}/", data=body, headers=headers)
    _SIGNER.add_auth(request)
    lines = [b"POST / HTTP/1.1", f"Host: {HOST}".encode()]
    lines += [f"{k}: {v}".encode() for k, v in request.headers.items()]
    lines.append(f"Content-Length: {len(body)}".encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@dataclass(frozen=True)
class Answer:
    """What the benchmark checks in a response."""

    status: int
    messages: list[tuple[str, str]]  # (receipt handle, body) of received messages
    successful: int  # entries of a batch answer that succeeded
    failed: int
    queue_url: str | None


_XML_MESSAGE = re.compile(rb"<Message>(.*?)</Message>", re.S)
_XML_HANDLE = re.compile(rb"<ReceiptHandle>(.*?)</ReceiptHandle>", re.S)
_XML_BODY = re.compile(rb"<Body>(.*?)</Body>", re.S)
_XML_OK = re.compile(rb"<\w+BatchResultEntry>")
_XML_FAILED = re.compile(rb"<BatchResultErrorEntry>")
_XML_URL = re.compile(rb"<QueueUrl>(.*?)</QueueUrl>")


def parse(protocol: str, status: int, body: bytes) -> Answer:
    if protocol == "json":
        data: dict[str, Any] = json.loads(body) if body else {}
        return Answer(
            status,
            [(m["ReceiptHandle"], m["Body"]) for m in data.get("Messages") or []],
            len(data.get("Successful") or []),
            len(data.get("Failed") or []),
            data.get("QueueUrl"),
        )
    messages = []
    for raw in _XML_MESSAGE.findall(body):
        handle, text = _XML_HANDLE.search(raw), _XML_BODY.search(raw)
        assert handle is not None and text is not None
        messages.append((handle.group(1).decode(), text.group(1).decode()))
    url = _XML_URL.search(body)
    return Answer(
        status,
        messages,
        len(_XML_OK.findall(body)),
        len(_XML_FAILED.findall(body)),
        url.group(1).decode() if url else None,
    )
