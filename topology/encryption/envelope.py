"""The envelope: one encrypted value (a body, or a message's attributes) with what opens it.

    offset  size  content
    0       4     b"KQE1": the magic and the format's version
    4       1     purpose: b"B" a message body, b"A" a message's attributes (JSON)
    5       1     n, the length of the master key id
    6       n     the master key id (ASCII): which master key wrapped the data key
    6+n     2     m, the length of the wrapped data key (big-endian)
    8+n     m     the wrapped data key (the key provider's own form, see `keys.py`)
    8+n+m   12    the nonce
    20+n+m  ...   AES-256-GCM ciphertext of the value, then its 16-byte tag

The associated data of the AES-GCM encryption is everything before the nonce, so a changed
key id, wrapped key or purpose fails the tag as a changed ciphertext does. The envelope is
self-contained: any gateway of a deployment, a restarted one, or a Kafka-native reader holding
the master key opens it from these bytes alone (`docs/architecture/encryption.md`).

A queue-topic record whose value and attributes are envelopes carries the header
`HEADER_ENCRYPTED`; its attributes travel in the one header `HEADER_ENCRYPTED_ATTRIBUTES`
instead of one `sqs.attr.<Name>` each (`topology/record_format.py`).
"""

from __future__ import annotations

import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"KQE1"
PURPOSE_BODY = b"B"
PURPOSE_ATTRIBUTES = b"A"
NONCE_BYTES = 12
TAG_BYTES = 16
DATA_KEY_BYTES = 32  # AES-256
HEADER_ENCRYPTED = "kqs.encrypted"
HEADER_ENCRYPTED_ATTRIBUTES = "kqs.encrypted-attributes"
# The value of `HEADER_ENCRYPTED`: the envelope format the record's envelopes are in.
ENCRYPTED_FORMAT = b"1"
_U16 = struct.Struct(">H")


class EnvelopeError(ValueError):
    """An envelope that cannot be opened: not an envelope, tampered with, or under a master
    key this reader does not hold (`UnknownMasterKey`)."""


class UnknownMasterKey(EnvelopeError):
    """The envelope's data key was wrapped by a master key this reader does not hold."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"no master key {key_id!r} to open this envelope")
        self.key_id = key_id


def header(purpose: bytes, key_id: str, wrapped_key: bytes) -> bytes:
    """The bytes before the nonce; the same for every envelope of one data key and purpose,
    so a data key makes its two headers once (`DataKey`)."""
    raw_id = key_id.encode("ascii")
    if not 0 < len(raw_id) < 256:
        raise ValueError(f"a master key id is 1-255 ASCII characters: {key_id!r}")
    return b"".join(
        (MAGIC, purpose, bytes((len(raw_id),)), raw_id, _U16.pack(len(wrapped_key)), wrapped_key)
    )


def seal(head: bytes, cipher: AESGCM, plaintext: bytes) -> bytes:
    """An envelope of `plaintext` under the data key `cipher` holds, `head` from `header`."""
    nonce = os.urandom(NONCE_BYTES)
    return b"".join((head, nonce, cipher.encrypt(nonce, plaintext, head)))


def parse(envelope: bytes) -> tuple[bytes, str, bytes, int]:
    """(purpose, master key id, wrapped data key, where the nonce starts) of an envelope."""
    if len(envelope) < 8 or envelope[:4] != MAGIC:
        raise EnvelopeError("not a KQS envelope")
    purpose = envelope[4:5]
    id_end = 6 + envelope[5]
    key_id = envelope[6:id_end].decode("ascii", errors="replace")
    if len(envelope) < id_end + 2:
        raise EnvelopeError("a truncated KQS envelope")
    (wrapped_length,) = _U16.unpack_from(envelope, id_end)
    nonce_at = id_end + 2 + wrapped_length
    if len(envelope) < nonce_at + NONCE_BYTES + TAG_BYTES:
        raise EnvelopeError("a truncated KQS envelope")
    return purpose, key_id, envelope[id_end + 2 : nonce_at], nonce_at


def open_with(envelope: bytes, nonce_at: int, cipher: AESGCM) -> bytes:
    """The plaintext of an envelope `parse` read, under its data key's `cipher`."""
    nonce = envelope[nonce_at : nonce_at + NONCE_BYTES]
    try:
        return cipher.decrypt(nonce, envelope[nonce_at + NONCE_BYTES :], envelope[:nonce_at])
    except InvalidTag as error:
        raise EnvelopeError("a KQS envelope failed its authentication tag") from error
