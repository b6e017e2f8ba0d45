"""The stored form of a message (format 3) and reading what earlier versions stored (1, 2)."""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import replace

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


@pytest.mark.parametrize(
    "message",
    [
        PLAIN,
        StoredMessage(
            message_id="id-ü",
            body=b"",
            sent_ms=-5,
            delay_s=900,
            sender_id="",
            receive_count=2,
            first_receive_ms=7,
            body_md5=hashlib.md5(b"").digest(),
        ),
    ],
    ids=["plain", "empty-body-moved"],
)
def test_the_common_message_is_stored_as_the_general_way_stores_it(
    message: StoredMessage,
) -> None:
    # `encode` writes a message without optional texts or attributes in one pack; its bytes
    # must be exactly those of the general encoding (`_encode_any`), which decode reads.
    assert message.encode() == message._encode_any()


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


def _format_2(message: StoredMessage) -> bytes:
    """What ca539b9 to b1502d1 stored: format 3 without the body's digest."""
    texts = [t.encode() if t is not None else None for t in message._texts()]
    attrs = json.dumps({k: v.to_json() for k, v in message.attributes.items()}).encode()
    head = struct.pack(
        ">BqiiqIIIIIIII",
        2,
        message.sent_ms,
        message.delay_s,
        message.receive_count,
        message.first_receive_ms,
        *[len(t) if t is not None else 0xFFFFFFFF for t in texts],
        len(attrs) if message.attributes else 0,
    )
    return b"".join([head, *[t for t in texts if t], attrs if message.attributes else b""]) + (
        message.body
    )


@pytest.mark.parametrize("message", [PLAIN, EVERY_FIELD], ids=["plain", "every-field"])
def test_messages_stored_in_format_2_still_read_and_their_digest_is_computed(
    message: StoredMessage,
) -> None:
    raw = _format_2(message)
    read = StoredMessage.decode(raw)
    assert read == message
    assert read.body_md5 == b""  # not stored then: computed when asked for
    assert read.md5_of_body() == hashlib.md5(message.body).hexdigest()
    assert StoredMessage.id_of(raw) == message.message_id


def test_the_stored_digest_is_the_one_a_send_computed() -> None:
    # A send computes the digest for its answer; storing does not compute it again
    marked = StoredMessage("m", b"body", 1, body_md5=b"\x01" * 16)
    assert StoredMessage.decode(marked.encode()).body_md5 == b"\x01" * 16


def test_the_ids_of_received_messages_are_taken_once_and_bounded() -> None:
    ids = RecentIds(size=2)
    for offset in range(5):
        ids.remember((b"p", offset), (f"m{offset}", 1000 + offset))
    assert len(ids) <= 4  # two generations of at most two
    assert ids.take((b"p", 4)) == ("m4", 1004)
    assert ids.take((b"p", 4)) is None  # taken: a second delete reads the store
    assert ids.take((b"p", 0)) is None  # dropped with an older generation
    assert ids.take((b"q", 3)) is None  # another partition's offset 3


def test_a_replayed_message_keeps_its_origin_in_format_4_and_others_stay_in_format_3() -> None:
    # Given a message a replay task re-sent, and the same without an origin
    replayed = replace(EVERY_FIELD, replay_of='{"task":"t","partition":1,"offset":9}')

    # When each is stored
    raw, plain = replayed.encode(), EVERY_FIELD.encode()

    # Then the replay's reads back whole in format 4; the other is format 3 as before
    assert (raw[0], plain[0]) == (4, 3)
    assert StoredMessage.decode(raw) == replayed
    assert StoredMessage.id_of(raw) == replayed.message_id
    assert StoredMessage.decode(plain).replay_of is None
    fast = replace(PLAIN, replay_of="origin")  # not the one-pack common case any more
    assert StoredMessage.decode(fast.encode()) == fast
