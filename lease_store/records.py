"""Values the lease store keeps: lease facts and the stored copy of each message.

A `LeaseFact` holds facts, never a state name: whether a message is visible, in flight or
delayed is derived from the facts and the clock (see `state.py`). A `StoredMessage` is the
gateway's copy of a queue-topic record, kept in RocksDB so that receiving never has to seek
the Kafka log and a large backlog never sits in Python memory.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field

_FACT = struct.Struct(">qqiqq")
# How an encoded StoredMessage's metadata begins, after its 4-byte length (see `encode`).
_ID_PREFIX = b'{"id":"'


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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

    def encode(self) -> bytes:
        meta = {
            "id": self.message_id,
            "sent": self.sent_ms,
            "delay": self.delay_s,
            "attrs": {k: v.to_json() for k, v in self.attributes.items()},
            "sender": self.sender_id,
            "trace": self.aws_trace_header,
            "group": self.message_group_id,
            "dlq_src": self.dead_letter_source_arn,
        }
        if self.receive_count:
            meta["rc"] = self.receive_count
            meta["frt"] = self.first_receive_ms
        if self.deduplication_id is not None:
            meta["dedup"] = self.deduplication_id
            meta["dscope"] = self.deduplication_scope
        meta_raw = json.dumps(meta, separators=(",", ":")).encode()
        return struct.pack(">I", len(meta_raw)) + meta_raw + self.body

    @staticmethod
    def id_of(raw: bytes) -> str:
        """The MessageId of an encoded message, without decoding the rest (a delete's event
        needs only this): `encode` writes it first."""
        start = 4 + len(_ID_PREFIX)
        if raw.startswith(_ID_PREFIX, 4):
            end = raw.find(b'"', start)
            if end > 0 and raw.find(b"\\", start, end) < 0:  # no JSON escapes to undo
                return raw[start:end].decode()
        return StoredMessage.decode(raw).message_id

    @classmethod
    def decode(cls, raw: bytes) -> StoredMessage:
        (meta_len,) = struct.unpack_from(">I", raw)
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
