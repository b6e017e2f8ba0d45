"""Deduplication claims: how DeduplicationScope=queue stays exact across gateways (pure).

With scope `queue`, one deduplication id spans every message group of the queue, and the
groups live on different partitions, which different gateways serve. Each id therefore has
one place where it is decided: its claim partition, the CRC-32 of the id modulo the
queue's partitions (`claim_partition`). A send goes to the gateway serving that partition,
which claims the id there before the message is sent to its group's partition:

* no claim within the last five minutes: a `Claim` naming the message (its id, SentTimestamp,
  group partition and `fingerprint`) is written to the claim partition's notes
  (`notes.py`), synced to the WAL and acknowledged by the lease changelog (with several
  gateways: `GroupSync`); only then is the message
  sent, and its offset (the SequenceNumber) added to the claim (`confirmed`);
* a claim with an offset: the send is a duplicate, answered with the claimed message's
  MessageId and SequenceNumber, nothing sent;
* a claim without an offset (its sender failed, or its gateway stopped, between the claim
  and the answer): a send with the same fingerprint is the same message sent again (a
  client's retry): it is sent under the claimed MessageId to the claimed group partition,
  whose ingest keeps only the first copy in its log (`fifo.deduplicate`), so it is sent at
  most once whatever the first try did. Another message with the id gets the claimed
  message's answer if a copy of it is in its group partition's window (asked of that
  partition's owner), else ServiceUnavailable until one is (or the claim's five minutes
  pass).

Why it is exact: one gateway serves a partition at a time, and it serialises the sends of one
id (`FifoService._pending`); a claim is durable in the claim partition's WAL and in the
changelog before the message is sent, so the partition's next owner, which restores from the
changelog read to its end, finds it; and every message sent under a claim goes to one
partition with one scope key, where log order keeps the first.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass, replace

from lease_store.records import StoredMessage

_HEAD = struct.Struct(">qiq")  # sent_ms, group partition, offset (-1: not known yet)
_FINGERPRINT = 32
UNCONFIRMED = -1


def claim_partition(deduplication_id: str, partitions: int) -> int:
    """The partition whose owner decides a deduplication id of scope `queue`."""
    return zlib.crc32(deduplication_id.encode()) % partitions


def fingerprint(message: StoredMessage) -> bytes:
    """What makes two sends the same message: its group, body and attributes (a client's
    retry repeats them; another message under the same id differs in one)."""
    digest = hashlib.sha256()
    for part in (
        (message.message_group_id or "").encode(),
        message.body,
        repr(sorted(message.attributes.items())).encode(),
    ):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()


@dataclass(frozen=True, slots=True)
class Claim:
    """The message a deduplication id of scope `queue` was first sent with."""

    message_id: str
    sent_ms: int
    partition: int  # the message's group partition
    fingerprint: bytes
    offset: int = UNCONFIRMED  # in its group partition, once known

    @property
    def confirmed(self) -> bool:
        return self.offset != UNCONFIRMED

    def with_offset(self, offset: int) -> Claim:
        return replace(self, offset=offset)

    def encode(self) -> bytes:
        return (
            _HEAD.pack(self.sent_ms, self.partition, self.offset)
            + self.fingerprint
            + self.message_id.encode()
        )

    @classmethod
    def decode(cls, raw: bytes) -> Claim:
        sent_ms, partition, offset = _HEAD.unpack_from(raw)
        at = _HEAD.size
        return cls(
            raw[at + _FINGERPRINT :].decode(),
            sent_ms,
            partition,
            raw[at : at + _FINGERPRINT],
            offset,
        )

    @classmethod
    def of(cls, message: StoredMessage, partition: int) -> Claim:
        return cls(message.message_id, message.sent_ms, partition, fingerprint(message))

    def same_message(self, message: StoredMessage) -> bool:
        return self.fingerprint == fingerprint(message)

    def resend(self, message: StoredMessage) -> StoredMessage:
        """`message` (the same message sent again) as the claim admitted it: its MessageId
        and SentTimestamp, so its copies are one message and its window starts as claimed."""
        return replace(message, message_id=self.message_id, sent_ms=self.sent_ms)
