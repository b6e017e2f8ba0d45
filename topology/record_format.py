"""How an SQS message is laid out as a Kafka record on its queue topic.

    key       message id (UTF-8); on a FIFO queue the message group id, the message id then
              travelling in the sqs.message-id header
    value     message body (the UTF-8 bytes the client sent)
    timestamp SentTimestamp (CreateTime, ms)
    headers   sqs.sender-id, sqs.delay-seconds, sqs.aws-trace-header, sqs.message-group-id,
              sqs.dead-letter-source-arn, sqs.message-deduplication-id and
              sqs.deduplication-scope (FIFO), kqs.replay-of (a replayed message: JSON
              `ReplayOrigin`), and one `sqs.attr.<Name>` per message attribute whose
              value is JSON {"DataType": ..., "StringValue": ...} or {..., "BinaryValue": base64}

On a queue encrypted at rest (`topology/encryption/`), the value is the body's envelope, the
header `kqs.encrypted` says so, and the attributes travel encrypted in the one header
`kqs.encrypted-attributes` instead of one `sqs.attr.<Name>` each.

A Kafka-native consumer therefore reads a queue as an ordinary topic of bodies, and a record
written by a Kafka-native producer (no headers, maybe no key) is still a valid message: its id
is derived from its coordinates and it has no attributes. This module is shared with
`spark_streaming`, which must not import gateway code.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from lease_store.records import AttributeValue, StoredMessage
from topology.encryption.envelope import (
    ENCRYPTED_FORMAT,
    HEADER_ENCRYPTED,
    HEADER_ENCRYPTED_ATTRIBUTES,
)

HEADER_SENDER = "sqs.sender-id"
HEADER_DELAY = "sqs.delay-seconds"
HEADER_TRACE = "sqs.aws-trace-header"
HEADER_GROUP = "sqs.message-group-id"
HEADER_DLQ_SOURCE = "sqs.dead-letter-source-arn"
# On records moved to a dead-letter queue: the receives the message had in its source queue.
HEADER_RECEIVE_COUNT = "sqs.receive-count"
HEADER_FIRST_RECEIVE = "sqs.first-receive-timestamp"
# FIFO queues: the key is the group, so the id travels here; the deduplication id, and the
# queue's DeduplicationScope when the message takes part in deduplication (lease_store/fifo.py).
HEADER_MESSAGE_ID = "sqs.message-id"
HEADER_DEDUPLICATION_ID = "sqs.message-deduplication-id"
HEADER_DEDUPLICATION_SCOPE = "sqs.deduplication-scope"
# On a message a replay task re-sent (gateway/sqs/replay/): `ReplayOrigin` as JSON.
HEADER_REPLAY_OF = "kqs.replay-of"
ATTRIBUTE_PREFIX = "sqs.attr."
# The largest queue-topic record: a 1 MiB SQS message (body + attributes) whose binary
# attributes travel base64-encoded in JSON headers, plus framing. Producer and topics allow it;
# Kafka's 1 MB defaults would refuse a 1 MiB body.
MAX_RECORD_BYTES = 4 * 1024 * 1024

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class ReplayOrigin:
    """Where a replayed message comes from: the task that re-sent it, the source record's
    coordinates (how a resumed task finds what it already sent), and the original
    MessageId and SentTimestamp (what a consumer is shown)."""

    task_id: str
    partition: int
    offset: int
    message_id: str
    sent_ms: int

    def encode(self) -> str:
        return json.dumps(
            {
                "task": self.task_id,
                "partition": self.partition,
                "offset": self.offset,
                "id": self.message_id,
                "sent": self.sent_ms,
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str | None) -> ReplayOrigin | None:
        """The origin a `StoredMessage.replay_of` holds; None for a message no replay sent
        (or a header a foreign producer wrote that does not parse)."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            return cls(
                str(raw["task"]),
                int(raw["partition"]),
                int(raw["offset"]),
                str(raw["id"]),
                int(raw["sent"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


def to_headers(message: StoredMessage, id_in_header: bool = False) -> Headers:
    """The record headers of a message; `id_in_header` when the key is not the message id."""
    headers: Headers = [(HEADER_SENDER, message.sender_id.encode())]
    if id_in_header:
        headers.append((HEADER_MESSAGE_ID, message.message_id.encode()))
    if message.deduplication_id is not None:
        headers.append((HEADER_DEDUPLICATION_ID, message.deduplication_id.encode()))
        if message.deduplication_scope is not None:
            headers.append((HEADER_DEDUPLICATION_SCOPE, message.deduplication_scope.encode()))
    if message.delay_s:
        headers.append((HEADER_DELAY, str(message.delay_s).encode()))
    if message.aws_trace_header is not None:
        headers.append((HEADER_TRACE, message.aws_trace_header.encode()))
    if message.message_group_id is not None:
        headers.append((HEADER_GROUP, message.message_group_id.encode()))
    if message.dead_letter_source_arn is not None:
        headers.append((HEADER_DLQ_SOURCE, message.dead_letter_source_arn.encode()))
    if message.receive_count:
        headers.append((HEADER_RECEIVE_COUNT, str(message.receive_count).encode()))
        headers.append((HEADER_FIRST_RECEIVE, str(message.first_receive_ms).encode()))
    if message.replay_of is not None:
        headers.append((HEADER_REPLAY_OF, message.replay_of.encode()))
    for name, value in message.attributes.items():
        headers.append((ATTRIBUTE_PREFIX + name, json.dumps(value.to_json()).encode()))
    if message.sealed:
        headers.append((HEADER_ENCRYPTED, ENCRYPTED_FORMAT))
        if message.sealed_attributes:
            headers.append((HEADER_ENCRYPTED_ATTRIBUTES, message.sealed_attributes))
    return headers


def from_record(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> StoredMessage:
    """Rebuild the message of a queue-topic record, whoever produced it."""
    fields: dict[str, str] = {}
    attributes: dict[str, AttributeValue] = {}
    sealed_attributes = b""
    for name, raw in headers or ():
        if name == HEADER_ENCRYPTED_ATTRIBUTES:
            sealed_attributes = raw or b""  # an envelope: bytes, not text
            continue
        text = (raw or b"").decode("utf-8", errors="replace")
        if name.startswith(ATTRIBUTE_PREFIX):
            attribute = _attribute(text)
            if attribute is not None:
                attributes[name[len(ATTRIBUTE_PREFIX) :]] = attribute
        else:
            fields[name] = text
    if HEADER_MESSAGE_ID in fields:
        message_id = fields[HEADER_MESSAGE_ID]
    elif key:
        message_id = key.decode("utf-8", errors="replace")
    else:
        message_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"kafka:{topic}/{partition}/{offset}"))
    sealed = HEADER_ENCRYPTED in fields
    return StoredMessage(
        message_id=message_id,
        body=value or b"",
        sent_ms=timestamp_ms,
        delay_s=int(fields.get(HEADER_DELAY, "0")),
        # A foreign producer's sqs.attr.* headers on an encrypted record are not the message's.
        attributes=attributes if not sealed else {},
        sender_id=fields.get(HEADER_SENDER, ""),
        aws_trace_header=fields.get(HEADER_TRACE),
        message_group_id=fields.get(HEADER_GROUP),
        dead_letter_source_arn=fields.get(HEADER_DLQ_SOURCE),
        receive_count=_int(fields.get(HEADER_RECEIVE_COUNT)),
        first_receive_ms=_int(fields.get(HEADER_FIRST_RECEIVE)),
        deduplication_id=fields.get(HEADER_DEDUPLICATION_ID),
        deduplication_scope=fields.get(HEADER_DEDUPLICATION_SCOPE),
        replay_of=fields.get(HEADER_REPLAY_OF),
        sealed=sealed,
        sealed_attributes=sealed_attributes if sealed else b"",
    )


def _int(text: str | None) -> int:
    """A numeric header; absent or malformed (a foreign producer's) counts as 0."""
    try:
        return max(0, int(text)) if text else 0
    except ValueError:
        return 0


def _attribute(text: str) -> AttributeValue | None:
    """Decode an attribute header; a malformed one from a foreign producer is ignored."""
    try:
        return AttributeValue.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return None
