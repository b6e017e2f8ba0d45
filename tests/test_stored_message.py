"""The stored form of a message (format 2) and reading what earlier versions stored (1)."""

from __future__ import annotations

import json
import struct

import pytest

from lease_store.recent_ids import RecentIds
from lease_store.records import AttributeValue, StoredMessage

PLAIN = StoredMessage(
    message_id="9b2c1d3e-1111-2222-3333-444455556666", body=b"x" * 1024, sent_ms=1
)
EVERY_FIELD = StoredMessage(
    message_id="id-ü",  # non-ASCII text is stored as UTF-8
    body=b"\x00\xff binary body",
    sent_ms=1_700_000_000_123,
    delay_s=900,
    attributes={
        "s": AttributeValue("String", string_value="é"),
        "n": AttributeValue("Number.int", string_value="12"),
        "b": AttributeValue("Binary", binary_value=b"\x01\x02"),
    },
    sender_id="AIDAEXAMPLE",
    aws_trace_header="Root=1-5759e988-bd862e3fe1be46a994272793",
    message_group_id="group/1",
    dead_letter_source_arn="arn:aws:sqs:us-east-1:000000000000:source",
    receive_count=3,
    first_receive_ms=1_700_000_000_456,
    deduplication_id="",  # empty text is not the same as absent
    deduplication_scope="queue",
)


@pytest.mark.parametrize("message", [PLAIN, EVERY_FIELD], ids=["plain", "every-field"])
def test_a_message_reads_back_as_written(message: StoredMessage) -> None:
    raw = message.encode()
    assert StoredMessage.decode(raw) == message
    assert StoredMessage.id_of(raw) == message.message_id


def _format_1(message: StoredMessage) -> bytes:
    """What versions before format 2 stored: a 4-byte length, JSON metadata, the body."""
    meta = {
        "id": message.message_id,
        "sent": message.sent_ms,
        "delay": message.delay_s,
        "attrs": {k: v.to_json() for k, v in message.attributes.items()},
        "sender": message.sender_id,
        "trace": message.aws_trace_header,
        "group": message.message_group_id,
        "dlq_src": message.dead_letter_source_arn,
        "rc": message.receive_count,
        "frt": message.first_receive_ms,
        "dedup": message.deduplication_id,
        "dscope": message.deduplication_scope,
    }
    raw = json.dumps(meta, separators=(",", ":")).encode()
    return struct.pack(">I", len(raw)) + raw + message.body


@pytest.mark.parametrize("message", [PLAIN, EVERY_FIELD], ids=["plain", "every-field"])
def test_messages_stored_by_earlier_versions_still_read(message: StoredMessage) -> None:
    raw = _format_1(message)
    assert StoredMessage.decode(raw) == message
    assert StoredMessage.id_of(raw) == message.message_id


def test_the_ids_of_received_messages_are_taken_once_and_bounded() -> None:
    ids = RecentIds(size=2)
    for offset in range(5):
        ids.remember(b"p", offset, f"m{offset}")
    assert len(ids) <= 4  # two generations of at most two
    assert ids.take(b"p", 4) == "m4"
    assert ids.take(b"p", 4) is None  # taken: a second delete reads the store
    assert ids.take(b"p", 0) is None  # dropped with an older generation
    assert ids.take(b"q", 3) is None  # another partition's offset 3
