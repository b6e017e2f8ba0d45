"""Encryption at rest: which queues are encrypted, sealing their messages, and what a queue
reports about it (docs/architecture/encryption.md).

A queue is encrypted when the gateway has a key provider and the queue asks for it: a
`KmsMasterKeyId`, or `SqsManagedSseEnabled` true (the default, as in SQS). Without a key
provider nothing is encrypted, and no queue says otherwise: GetQueueAttributes reports
`SqsManagedSseEnabled` false, and a `KmsMasterKeyId` cannot be set (`check_settable`).

Messages are sealed where they are handed to the producer (`Sending._start_send`), so the
queue record, the lease store's copy and every later re-send (dead-letter moves, move tasks)
hold the sealed form; they are opened only where a body or attributes leave KQS: a receive's
answer, and a move to a queue that is not encrypted (then re-sealed for the destination if it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gateway.common.errors import InvalidAttributeValue, KmsNotFound
from lease_store.clock import Clock
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord
from topology.encryption.data_keys import DEFAULT_REUSE_S, DataKeys
from topology.encryption.envelope import EnvelopeError, UnknownMasterKey
from topology.encryption.keys import FileKeyProvider
from topology.encryption.messages import open_message, seal_message

SSE_ATTRIBUTE = "SqsManagedSseEnabled"
KMS_ATTRIBUTE = "KmsMasterKeyId"
REUSE_ATTRIBUTE = "KmsDataKeyReusePeriodSeconds"


def wanted_key(attributes: Mapping[str, str]) -> tuple[str | None, int] | None:
    """What a queue's attributes ask for: (KmsMasterKeyId or None for SQS-managed, the data
    key reuse period in s), or None for no encryption. SqsManagedSseEnabled is true unless set
    otherwise, as a new SQS queue's is."""
    reuse_s = int(attributes.get(REUSE_ATTRIBUTE, DEFAULT_REUSE_S))
    kms = attributes.get(KMS_ATTRIBUTE)
    if kms:
        return kms, reuse_s
    if attributes.get(SSE_ATTRIBUTE, "true") == "true":
        return None, reuse_s
    return None


def build_encryption(master_key_file: str, clock: Clock) -> QueueEncryption:
    """The gateway's encryption at rest: with the master keys of `master_key_file`, or none."""
    if not master_key_file:
        return QueueEncryption()
    return QueueEncryption(DataKeys(FileKeyProvider.from_file(Path(master_key_file)), clock))


class QueueEncryption:
    """The gateway's encryption at rest; `keys` None: no key provider, nothing encrypted."""

    def __init__(self, keys: DataKeys | None = None) -> None:
        self._keys = keys

    @property
    def available(self) -> bool:
        return self._keys is not None

    def for_queue(self, record: QueueRecord, message: StoredMessage) -> StoredMessage:
        """`message` as the queue's record holds it: sealed when the queue is encrypted, in
        clear when not (a sealed one from another queue is opened first)."""
        if message.sealed:
            message = self.open(message)
        if self._keys is None:
            return message
        wanted = wanted_key(record.attributes)
        if wanted is None:
            return message
        # One data key per queue incarnation and reuse period, as SQS has one per queue.
        key = self._keys.for_sealing(record.topic, *wanted)
        return seal_message(message, self._keys, key)

    def open(self, message: StoredMessage) -> StoredMessage:
        """`message` in clear; `KmsNotFound` when its master key is not this gateway's."""
        if not message.sealed:
            return message
        if self._keys is None:
            raise KmsNotFound(
                "This message is encrypted and this gateway has no master key "
                "(KQS_MASTER_KEY_FILE)."
            )
        try:
            return open_message(message, self._keys)
        except UnknownMasterKey as error:
            raise KmsNotFound(
                f"This message is encrypted under master key {error.key_id}, which this "
                "gateway does not hold."
            ) from error
        except EnvelopeError as error:
            raise KmsNotFound(f"This message does not decrypt: {error}") from error

    def reported(self, values: dict[str, str]) -> None:
        """Make GetQueueAttributes' `values` say what the queue's messages have: no
        encryption without a key provider, whatever the queue asked for."""
        if self._keys is None:
            values[SSE_ATTRIBUTE] = "false"
            values.pop(KMS_ATTRIBUTE, None)
            values.pop(REUSE_ATTRIBUTE, None)

    def check_settable(self, attributes: Mapping[str, str]) -> None:
        """CreateQueue / SetQueueAttributes: a KmsMasterKeyId needs a key provider.
        (SqsManagedSseEnabled true is accepted and reported false, so that tools which send
        AWS's default work against a gateway without keys.)"""
        if self._keys is None and attributes.get(KMS_ATTRIBUTE):
            raise InvalidAttributeValue(
                "Invalid value for the parameter KmsMasterKeyId. Reason: this gateway has no "
                "master key to encrypt with (KQS_MASTER_KEY_FILE)."
            )
