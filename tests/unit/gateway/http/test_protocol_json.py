"""The JSON protocol's answer bodies (`gateway.http.protocol.write_json`): the same document as
the json module writes, in UTF-8, including what only the json module can write."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.http.protocol import write_json

RECEIVED: dict[str, Any] = {
    "Messages": [
        {
            "MessageId": "0b6f3f5e-1a4c-4f0e-9f1e-2a1b3c4d5e6f",
            "ReceiptHandle": "AQEB+abc/def==",
            "MD5OfBody": "d41d8cd98f00b204e9800998ecf8427e",
            "Body": 'ünïcødé 🎉 "quoted" \\ back\tslash\r\n\u2028 <xml/> &amp;',
            "Attributes": {"SentTimestamp": "1764000000000", "ApproximateReceiveCount": "1"},
            "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "-1.5e3"}},
        }
    ]
}


@pytest.mark.parametrize(
    "document",
    [
        RECEIVED,
        {},
        {"Successful": [], "Failed": [{"Id": "a", "SenderFault": True, "Code": "X"}]},
        {"QueueUrls": ["http://localhost:9324/000000000000/q"], "n": 0, "none": None},
    ],
)
def test_the_body_is_the_document_json_writes(document: dict[str, Any]) -> None:
    written = write_json(document)
    assert json.loads(written) == document == json.loads(json.dumps(document))
    # Characters outside ASCII are written as UTF-8, not escaped
    if document is RECEIVED:
        assert "ünïcødé 🎉".encode() in written


@pytest.mark.parametrize(
    "document",
    [{"message": "lone surrogate \ud800 from a client"}, {"big": 2**70}, {1: "int key"}],
)
def test_what_orjson_cannot_write_is_written_by_the_json_module(document: dict[Any, Any]) -> None:
    assert write_json(document) == json.dumps(document).encode()
