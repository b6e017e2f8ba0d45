"""Encryption at rest: which queues are encrypted, sealing their messages, and what a queue
reports about it (docs/architecture/encryption.md).

A queue is encrypted when the gateway has a key provider and the queue asks for it: a
`KmsMasterKeyId`, or `SqsManagedSseEnabled` true (the default, as in SQS). Without a key
provider nothing is encrypted, and no queue says otherwise: GetQueueAttributes reports
`SqsManagedSseEnabled` false, and a `KmsMasterKeyId` cannot be set (`check_settable`).
A `KmsMasterKeyId` is a key of the external KMS (`KQS_KMS_KEY_ID` configures one,
`topology/encryption/kms.py`), whose refusals answer as SQS's do (KMS.DisabledException, ...);
with a master key file only, none can be set, and one set before (KQS < this change served
it with the file's key) is reported as what it is: SQS-managed encryption.

Messages are sealed where they are handed to the producer (`Sending._start_send`), so the
queue record, the lease store's copy and every later re-send (dead-letter moves, move tasks)
hold the sealed form; they are opened only where a body or attributes leave KQS: a receive's
answer, and a move to a queue that is not encrypted (then re-sealed for the destination if it is).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path

from gateway.common import errors
from gateway.common.errors import InvalidAttributeValue, KmsNotFound, SqsError
from lease_store.clock import Clock
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord
from topology.encryption.data_keys import DEFAULT_REUSE_S, DataKeys
from topology.encryption.envelope import EnvelopeError, UnknownMasterKey
from topology.encryption.keys import FileKeyProvider, KeyProvider
from topology.encryption.kms import KmsError, KmsKeyProvider, KmsWithFileKeys
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


# KMS's error codes (`KmsError.code`) as SQS answers them; any other is KMS.InvalidStateException's
# kin for the client: a KMS failure it cannot mend by retrying as it is.
_KMS_ERRORS: dict[str, type[SqsError]] = {
    "NotFoundException": errors.KmsNotFound,
    "DisabledException": errors.KmsDisabled,
    "AccessDeniedException": errors.KmsAccessDenied,
    "KMSInvalidStateException": errors.KmsInvalidState,
    "InvalidKeyUsageException": errors.KmsInvalidKeyUsage,
    "IncorrectKeyException": errors.KmsInvalidKeyUsage,
    "InvalidCiphertextException": errors.KmsInvalidKeyUsage,
    "ThrottlingException": errors.KmsThrottled,
    "LimitExceededException": errors.KmsThrottled,
    "OptInRequired": errors.KmsOptInRequired,
}


def kms_error(error: KmsError) -> SqsError:
    """The SQS error for a KMS refusal; KMS unreachable is the gateway's ServiceUnavailable."""
    if error.code == "Unreachable":
        return errors.ServiceUnavailable(f"The KMS did not answer: {error.message}")
    cls = _KMS_ERRORS.get(error.code, errors.KmsInvalidState)
    return cls(f"KMS refused the request ({error.code}): {error.message}")


def build_encryption(master_key_file: str, clock: Clock, kms_key_id: str = "") -> QueueEncryption:
    """The gateway's encryption at rest: with the master keys of `master_key_file` and/or the
    KMS key `kms_key_id` (SQS-managed encryption takes the file's when there is one), or none."""
    file = FileKeyProvider.from_file(Path(master_key_file)) if master_key_file else None
    kms = KmsKeyProvider.from_environment(kms_key_id) if kms_key_id else None
    provider: KeyProvider
    if kms is not None:
        provider = kms if file is None else KmsWithFileKeys(kms, file)
    elif file is not None:
        provider = file
    else:
        return QueueEncryption()
    return QueueEncryption(DataKeys(provider, clock), kms=kms is not None)


def report_encryption(values: dict[str, str], keyed: bool, kms: bool) -> None:
    """`values` (a queue's attributes) as a gateway reports them: with a key provider
    (`keyed`), and an external KMS among its keys (`kms`), or not (`kqs inspect` too)."""
    if not keyed:
        values[SSE_ATTRIBUTE] = "false"
        values.pop(KMS_ATTRIBUTE, None)
        values.pop(REUSE_ATTRIBUTE, None)
    elif not kms and values.pop(KMS_ATTRIBUTE, None) is not None:
        values[SSE_ATTRIBUTE] = "true"  # sealed under the master key file (`for_queue`)


class QueueEncryption:
    """The gateway's encryption at rest; `keys` None: no key provider, nothing encrypted;
    `kms`: whether an external KMS holds the keys `KmsMasterKeyId`s name."""

    def __init__(self, keys: DataKeys | None = None, kms: bool = False) -> None:
        self._keys = keys
        self._kms = kms

    @property
    def available(self) -> bool:
        return self._keys is not None

    # -- KMS calls off the event loop -------------------------------------------------------
    # A KMS call is a network round trip (up to its timeouts): made in a thread before the
    # synchronous seal or open that would otherwise make it on the event loop. The file
    # provider's are microseconds and stay inline.

    def sealing_calls_kms(self, record: QueueRecord) -> bool:
        """Whether sealing the queue's next message needs a new data key from KMS."""
        if not self._kms or self._keys is None:
            return False
        wanted = wanted_key(record.attributes)
        return wanted is not None and self._keys.sealing_due(record.topic, *wanted)

    async def ready_to_seal(self, record: QueueRecord) -> None:
        """Have the queue's data key made by KMS in a thread (`sealing_calls_kms` first)."""
        assert self._keys is not None
        wanted = wanted_key(record.attributes)
        if wanted is None:
            return
        key_ref, _ = wanted
        loop = asyncio.get_running_loop()
        try:
            new = await loop.run_in_executor(None, self._keys.provider.new_data_key, key_ref)
        except KmsError as error:
            raise kms_error(error) from None
        self._keys.install(record.topic, key_ref, new)

    async def ready_to_open(self, messages: Iterable[StoredMessage]) -> None:
        """Unwrap in a thread the data keys of these messages that `open` would unwrap with
        KMS on the event loop. A failure is left to `open`, which raises the SQS error."""
        if not self._kms or self._keys is None:
            return
        keys = self._keys
        due = {found for m in messages if m.sealed and (found := keys.opening_due(m.body))}
        loop = asyncio.get_running_loop()
        for key_id, wrapped in due:
            try:
                plaintext = await loop.run_in_executor(None, keys.provider.unwrap, key_id, wrapped)
            except (KmsError, EnvelopeError, ValueError):
                continue
            keys.remember_unwrapped(key_id, wrapped, plaintext)

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
        key_ref, reuse_s = wanted
        if not self._kms:
            key_ref = None  # a KmsMasterKeyId set before KMS keys existed: the file's key
        # One data key per queue incarnation and reuse period, as SQS has one per queue.
        try:
            key = self._keys.for_sealing(record.topic, key_ref, reuse_s)
        except KmsError as error:
            raise kms_error(error) from None
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
        except KmsError as error:
            raise kms_error(error) from None
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
        report_encryption(values, keyed=self._keys is not None, kms=self._kms)

    def check_settable(self, attributes: Mapping[str, str]) -> None:
        """CreateQueue / SetQueueAttributes: a KmsMasterKeyId needs a KMS. (SqsManagedSseEnabled
        true is accepted and reported false, so that tools which send AWS's default work
        against a gateway without keys.) Whether KMS knows the key is found at the first send,
        as in SQS."""
        if self._keys is None and attributes.get(KMS_ATTRIBUTE):
            raise InvalidAttributeValue(
                "Invalid value for the parameter KmsMasterKeyId. Reason: this gateway has no "
                "master key to encrypt with (KQS_MASTER_KEY_FILE, KQS_KMS_KEY_ID)."
            )
        if not self._kms and attributes.get(KMS_ATTRIBUTE):
            raise InvalidAttributeValue(
                "Invalid value for the parameter KmsMasterKeyId. Reason: this gateway has no "
                "KMS (KQS_KMS_KEY_ID); its master key file serves SQS-managed encryption "
                "(SqsManagedSseEnabled)."
            )
