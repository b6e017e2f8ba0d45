"""Sealing and opening a message: its body and its attributes, each in an envelope.

A sealed `StoredMessage` is what an encrypted queue's record and lease-store entry hold: the
body's envelope for a body, no attributes, and the attributes' envelope beside (see
`StoredMessage.sealed`). The rest (ids, timestamps, sender, trace header, group and
deduplication ids, counts) stays in clear, as it does in SQS, whose encryption covers message
bodies; KQS covers the message attributes too.

`open_message` is the one way back, for every reader of stored or logged messages: the
receive, dead-letter and move-task re-sends, and replay or browse tools.
"""

from __future__ import annotations

from dataclasses import replace

from lease_store.records import StoredMessage, attributes_from_json, attributes_json
from topology.encryption.data_keys import DataKey, DataKeys
from topology.encryption.envelope import PURPOSE_ATTRIBUTES, PURPOSE_BODY


def seal_message(message: StoredMessage, keys: DataKeys, key: DataKey) -> StoredMessage:
    """`message` (in clear) sealed with the data key `key`."""
    attributes = attributes_json(message.attributes)
    return replace(
        message,
        body=keys.seal(key, PURPOSE_BODY, message.body),
        attributes={},
        sealed=True,
        sealed_attributes=keys.seal(key, PURPOSE_ATTRIBUTES, attributes) if attributes else b"",
        body_md5=b"",
    )


def open_message(message: StoredMessage, keys: DataKeys) -> StoredMessage:
    """`message` in clear: opened if sealed, as it is if not. Raises `EnvelopeError`."""
    if not message.sealed:
        return message
    attributes = (
        attributes_from_json(keys.open(message.sealed_attributes, PURPOSE_ATTRIBUTES))
        if message.sealed_attributes
        else {}
    )
    return replace(
        message,
        body=keys.open(message.body, PURPOSE_BODY),
        attributes=attributes,
        sealed=False,
        sealed_attributes=b"",
        body_md5=b"",
    )
