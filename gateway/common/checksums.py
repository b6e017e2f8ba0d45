"""The MD5 digests SQS returns and the SDKs verify (docs/SQS-BEHAVIOUR.md, "Checksums").

The body's digest is `StoredMessage.md5_of_body`: computed once when a message is sent (or
ingested from another producer) and stored with it, since every receive returns it.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

from lease_store.records import AttributeValue

_STRING_TRANSPORT = b"\x01"
_BINARY_TRANSPORT = b"\x02"


def _field(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def md5_of_attributes(attributes: Mapping[str, AttributeValue]) -> str | None:
    """The digest the SDKs compute over message (or system) attributes; None when empty."""
    if not attributes:
        return None
    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        digest.update(_field(name.encode()))
        digest.update(_field(value.data_type.encode()))
        if value.binary_value is not None:
            digest.update(_BINARY_TRANSPORT + _field(value.binary_value))
        else:
            digest.update(_STRING_TRANSPORT + _field((value.string_value or "").encode()))
    return digest.hexdigest()
