"""MD5OfMessageAttributes, from the spec (docs/SQS-BEHAVIOUR.md, "Checksums"), for e2e tests.

Independent of `gateway.common.checksums` on purpose: boto3 does not verify this digest, so the e2e
tests compare the server's value with this one. Input is boto3's shape:
`{name: {"DataType": ..., "StringValue": str} | {"DataType": ..., "BinaryValue": bytes}}`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any


def _length_prefixed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def attributes_md5(attributes: Mapping[str, Mapping[str, Any]]) -> str | None:
    if not attributes:
        return None
    buffer = bytearray()
    for name in sorted(attributes):
        value = attributes[name]
        buffer += _length_prefixed(name.encode("utf-8"))
        buffer += _length_prefixed(value["DataType"].encode("utf-8"))
        if "BinaryValue" in value:
            buffer += b"\x02" + _length_prefixed(bytes(value["BinaryValue"]))
        else:
            buffer += b"\x01" + _length_prefixed(value["StringValue"].encode("utf-8"))
    return hashlib.md5(bytes(buffer)).hexdigest()
