"""Values the lease store keeps: lease facts and the stored copy of each message.

A `LeaseFact` holds facts, never a state name: whether a message is visible, in flight or
delayed is derived from the facts and the clock (see `state.py`). A `StoredMessage` is the
gateway's copy of a queue-topic record, kept in RocksDB so that receiving never has to seek
the Kafka log and a large backlog never sits in Python memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import field

from lease_store.value_class import value_class

_FACT = struct.Struct(">qqiqq")
_U32 = struct.Struct(">I")
# StoredMessage format 3: tag, sent ms, delay s, receive count, first receive ms, the MD5
# digest of the body, the byte lengths of the 7 text fields and of the attributes' JSON (see
# `StoredMessage.encode`). Format 2 (written from ca539b9 to b1502d1) is the same without the digest.
_V3 = struct.Struct(">Bqiiq16sIIIIIIII")
# Format 4 (only for a message a replay task re-sent): format 3 with an eighth text, the
# replay's origin (`StoredMessage.replay_of`).
_V4 = struct.Struct(">Bqiiq16sIIIIIIIII")
_V2 = struct.Struct(">BqiiqIIIIIIII")
_FORMAT_3 = 3
_FORMAT_4 = 4
_FORMAT_2 = 2
# The tag of an encrypted message (formats 3 and 4): the format's, with this bit set. The body
# slot then holds the body's envelope, the attributes slot the attributes' envelope (empty:
# none), and the digest is zeros, since the body's MD5 would tell a guessed body apart (see
# `StoredMessage.sealed`). Format 1's first byte is 0, so the bit never meets it.
_SEALED_BIT = 0x80
_NO_DIGEST = bytes(16)
_ABSENT = 0xFFFFFFFF  # the length of a text field that is None
_FIVE_ABSENT = (_ABSENT,) * 5  # the five optional texts of most messages (`encode`)
# Where the MessageId's length sits in the header of each format.
_ID_LENGTH_AT = {
    _FORMAT_4: 1 + 8 + 4 + 4 + 8 + 16,
    _FORMAT_3: 1 + 8 + 4 + 4 + 8 + 16,
    _FORMAT_2: 1 + 8 + 4 + 4 + 8,
}
_HEADER_SIZE = {_FORMAT_4: _V4.size, _FORMAT_3: _V3.size, _FORMAT_2: _V2.size}
# How a format-1 StoredMessage's JSON metadata begins, after its 4-byte length.
_ID_PREFIX = b'{"id":"'


@value_class
class LeaseFact:
    sent_ms: int
    visible_at_ms: int
    receive_count: int = 0
    first_receive_ms: int = 0
    last_receive_ms: int = 0

    def encode(self) -> bytes:
        return _FACT.pack(
            self.sent_ms,
            self.visible_at_ms,
            self.receive_count,
            self.first_receive_ms,
            self.last_receive_ms,
        )

    @classmethod
    def decode(cls, raw: bytes) -> LeaseFact:
        return cls(*_FACT.unpack(raw))

    def with_visible_at(self, visible_at_ms: int) -> LeaseFact:
        # Spelled out rather than `dataclasses.replace`: this is on every lease change, and
        # `replace` costs several times a constructor call.
        return LeaseFact(
            self.sent_ms,
            visible_at_ms,
            self.receive_count,
            self.first_receive_ms,
            self.last_receive_ms,
        )


@value_class
class AttributeValue:
    """One SQS message attribute: `String`/`Number` values are text, `Binary` are bytes."""

    data_type: str
    string_value: str | None = None
    binary_value: bytes | None = None

    def to_json(self) -> dict[str, str]:
        out = {"DataType": self.data_type}
        if self.binary_value is not None:
            out["BinaryValue"] = base64.b64encode(self.binary_value).decode("ascii")
        else:
            out["StringValue"] = self.string_value or ""
        return out

    @classmethod
    def from_json(cls, raw: dict[str, str]) -> AttributeValue:
        binary = raw.get("BinaryValue")
        return cls(
            data_type=raw["DataType"],
            string_value=raw.get("StringValue"),
            binary_value=base64.b64decode(binary) if binary is not None else None,
        )


@value_class
class StoredMessage:
    message_id: str
    body: bytes
    sent_ms: int
    delay_s: int = 0
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    sender_id: str = ""
    aws_trace_header: str | None = None
    message_group_id: str | None = None
    dead_letter_source_arn: str | None = None
    # Carried over by a dead-letter move, as SQS does: the DLQ's first receive counts on
    # from the source queue's receives. 0 for every other message.
    receive_count: int = 0
    first_receive_ms: int = 0
    # FIFO queues: the MessageDeduplicationId, and the queue's DeduplicationScope when the
    # message takes part in deduplication (not on a copy moved to a dead-letter queue).
    deduplication_id: str | None = None
    deduplication_scope: str | None = None
    # The body's MD5 digest (16 bytes) when known: the send that built the message computed
    # it for its answer, and the stored form keeps it, so that a receive, which must return
    # it, does not hash every body again (~2 µs per KB). Empty: `encode` computes it. Not
    # compared: a message is the same whether or not its digest was computed yet.
    body_md5: bytes = field(default=b"", compare=False)
    # A message a replay task re-sent (gateway/sqs/replay/): where it comes from, as
    # `topology/record_format.py`'s `ReplayOrigin` encodes it. None for every other message.
    replay_of: str | None = None
    # Encrypted at rest (`topology/encryption/messages.py`): `body` is the body's envelope,
    # `attributes` is empty and `sealed_attributes` holds their envelope (empty: none). The
    # lease store keeps a sealed message as it is; the gateway opens it to answer a receive.
    sealed: bool = False
    sealed_attributes: bytes = b""

    def md5_of_body(self) -> str:
        """MD5OfBody / MD5OfMessageBody, as SQS returns them (hex)."""
        return (self.body_md5 or hashlib.md5(self.body).digest()).hex()  # as `_header` stores

    def _header(self, *lengths: int) -> bytes:
        """The fixed header (`_V3`, or `_V4` with the replay origin's length) ending in
        `lengths`: the 7 (8) texts' and the attributes'."""
        return (_V3 if len(lengths) == 8 else _V4).pack(
            (_FORMAT_3 if len(lengths) == 8 else _FORMAT_4) | (_SEALED_BIT if self.sealed else 0),
            self.sent_ms,
            self.delay_s,
            self.receive_count,
            self.first_receive_ms,
            _NO_DIGEST if self.sealed else (self.body_md5 or hashlib.md5(self.body).digest()),
            *lengths,
        )

    def encode(self) -> bytes:
        """The stored form (format 3): a fixed header, the text fields, attributes, body.

        Header (`_V3`): the tag 3, SentTimestamp, delay, receive count, first-receive time,
        the body's MD5 digest, then the byte length of each text field in `_texts` order
        (`_ABSENT` for None) and of the attributes' JSON (0 for none). Binary rather than
        JSON because every message is encoded once and decoded at each receive: this is ~2×
        cheaper both ways.
        """
        if (
            self.aws_trace_header is None
            and self.message_group_id is None
            and self.dead_letter_source_arn is None
            and self.deduplication_id is None
            and self.deduplication_scope is None
            and self.replay_of is None
            and not self.attributes
            and not self.sealed_attributes
        ):
            # Most messages: of the texts only the id and the sender, no attributes. The
            # same bytes as the general way below, in one pack and one join (1.0 µs against
            # 1.6 for a 1 KB message, on every message sent).
            message_id, sender_id = self.message_id.encode(), self.sender_id.encode()
            head = self._header(len(message_id), len(sender_id), *_FIVE_ABSENT, 0)
            return b"".join((head, message_id, sender_id, self.body))
        return self._encode_any()

    def _encode_any(self) -> bytes:
        """`encode` for any message."""
        lengths: list[int] = []
        parts: list[bytes] = []  # after the header: the texts present, attributes, body
        for text in self._texts():
            if text is None:
                lengths.append(_ABSENT)
            else:
                raw = text.encode()
                lengths.append(len(raw))
                parts.append(raw)
        attrs = self.sealed_attributes or attributes_json(self.attributes)
        parts.append(attrs)
        parts.append(self.body)
        return self._header(*lengths, len(attrs)) + b"".join(parts)

    def _texts(self) -> tuple[str | None, ...]:
        texts = (
            self.message_id,
            self.sender_id,
            self.aws_trace_header,
            self.message_group_id,
            self.dead_letter_source_arn,
            self.deduplication_id,
            self.deduplication_scope,
        )
        # Format 3 unless the message is a replay's: the stored form of every other message
        # stays as it was.
        return texts if self.replay_of is None else (*texts, self.replay_of)

    @staticmethod
    def id_of(raw: bytes) -> str:
        """The MessageId of an encoded message, without decoding the rest (a delete's event
        needs only this): every format holds it first."""
        tag = raw[0] & ~_SEALED_BIT
        if tag in _HEADER_SIZE:
            (length,) = _U32.unpack_from(raw, _ID_LENGTH_AT[tag])
            start = _HEADER_SIZE[tag]
            return raw[start : start + length].decode()
        start = 4 + len(_ID_PREFIX)
        if raw.startswith(_ID_PREFIX, 4):
            end = raw.find(b'"', start)
            if end > 0 and raw.find(b"\\", start, end) < 0:  # no JSON escapes to undo
                return raw[start:end].decode()
        return StoredMessage.decode(raw).message_id

    @classmethod
    def decode(cls, raw: bytes) -> StoredMessage:
        tag = raw[0] & ~_SEALED_BIT
        if tag == _FORMAT_4:
            (_, sent_ms, delay_s, receive_count, first_receive_ms, body_md5, *lengths) = (
                _V4.unpack_from(raw)
            )
            at = _V4.size
        elif tag == _FORMAT_3:
            (_, sent_ms, delay_s, receive_count, first_receive_ms, body_md5, *lengths) = (
                _V3.unpack_from(raw)
            )
            at = _V3.size
        elif tag == _FORMAT_2:
            (_, sent_ms, delay_s, receive_count, first_receive_ms, *lengths) = _V2.unpack_from(raw)
            body_md5, at = b"", _V2.size
        else:
            return cls._decode_format_1(raw)
        attrs_length = lengths.pop()
        texts: list[str | None] = []
        for length in lengths:
            if length == _ABSENT:
                texts.append(None)
            else:
                texts.append(raw[at : at + length].decode())
                at += length
        sealed = raw[0] != tag
        attributes = {}
        sealed_attributes = b""
        if sealed:
            sealed_attributes = raw[at : at + attrs_length]
            body_md5 = b""
            at += attrs_length
        elif attrs_length:
            attributes = attributes_from_json(raw[at : at + attrs_length])
            at += attrs_length
        replay_of = texts.pop() if len(texts) == 8 else None
        message_id, sender_id, trace, group, dlq_source, dedup_id, dedup_scope = texts
        return cls(
            message_id=message_id or "",
            body=raw[at:],
            sent_ms=sent_ms,
            delay_s=delay_s,
            attributes=attributes,
            sender_id=sender_id or "",
            aws_trace_header=trace,
            message_group_id=group,
            dead_letter_source_arn=dlq_source,
            receive_count=receive_count,
            first_receive_ms=first_receive_ms,
            deduplication_id=dedup_id,
            deduplication_scope=dedup_scope,
            body_md5=body_md5,
            replay_of=replay_of,
            sealed=sealed,
            sealed_attributes=sealed_attributes,
        )

    @classmethod
    def _decode_format_1(cls, raw: bytes) -> StoredMessage:
        """Format 1 (before ca539b9): a 4-byte length, JSON metadata, the body. Its first
        byte is 0 (metadata under 16 MiB), so it never starts with format 2's tag."""
        (meta_len,) = _U32.unpack_from(raw)
        meta = json.loads(raw[4 : 4 + meta_len])
        return cls(
            message_id=meta["id"],
            body=raw[4 + meta_len :],
            sent_ms=meta["sent"],
            delay_s=meta["delay"],
            attributes={k: AttributeValue.from_json(v) for k, v in meta["attrs"].items()},
            sender_id=meta["sender"],
            aws_trace_header=meta["trace"],
            message_group_id=meta["group"],
            dead_letter_source_arn=meta["dlq_src"],
            receive_count=meta.get("rc", 0),
            first_receive_ms=meta.get("frt", 0),
            deduplication_id=meta.get("dedup"),
            deduplication_scope=meta.get("dscope"),
        )


def attributes_json(attributes: dict[str, AttributeValue]) -> bytes:
    """Message attributes as the stored form (and an encrypted record) keep them: compact
    JSON `{name: {"DataType": ..., "StringValue" | "BinaryValue": ...}}`; empty for none."""
    if not attributes:
        return b""
    return json.dumps(
        {k: v.to_json() for k, v in attributes.items()}, separators=(",", ":")
    ).encode()


def attributes_from_json(raw: bytes) -> dict[str, AttributeValue]:
    return {k: AttributeValue.from_json(v) for k, v in json.loads(raw).items()}
