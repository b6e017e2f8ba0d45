"""Reading an encrypted queue's records from Kafka directly: for Kafka-native consumers.

    from confluent_kafka import DeserializingConsumer
    from topology.encryption.reader import DecryptingDeserializer, RecordOpener

    opener = RecordOpener.from_master_key_file("data/master.key")  # or .from_kms()
    consumer = DeserializingConsumer(
        {**consumer_config, "value.deserializer": DecryptingDeserializer(opener)}
    )
    # msg.value() is the body in clear; opener.attributes(msg.headers()) the attributes.

With a plain `Consumer`, call `opener.body(msg.value(), msg.headers())`. A record without the
`kqs.encrypted` header (a queue not encrypted, or a record written before it was) is passed
through as it is. The Java twin is `kqs.encryption.KqsDecryptingDeserializer` in
tests/clients/java (see `docs/architecture/encryption.md`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka.serialization import Deserializer, SerializationContext

from lease_store.clock import SystemClock
from topology.encryption.data_keys import DataKeys
from topology.encryption.envelope import (
    HEADER_ENCRYPTED,
    HEADER_ENCRYPTED_ATTRIBUTES,
    PURPOSE_ATTRIBUTES,
    PURPOSE_BODY,
)
from topology.encryption.keys import FileKeyProvider, KeyProvider
from topology.encryption.kms import KmsKeyProvider, KmsWithFileKeys

# As confluent-kafka gives them: a list of (name, value), or a dict from a producer's side.
RecordHeaders = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None


def _header(headers: RecordHeaders, name: str) -> bytes | None:
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for key, value in pairs:
        if key == name:
            return value.encode() if isinstance(value, str) else (value or b"")
    return None


class RecordOpener:
    """Opens the records of encrypted queues with a deployment's master keys."""

    def __init__(self, provider: KeyProvider) -> None:
        self._keys = DataKeys(provider, SystemClock())

    @classmethod
    def from_master_key_file(cls, path: str | Path) -> RecordOpener:
        return cls(FileKeyProvider.from_file(Path(path)))

    @classmethod
    def from_kms(cls, master_key_file: str | Path | None = None) -> RecordOpener:
        """For queues whose keys are in AWS KMS (a gateway with KQS_KMS_KEY_ID): KMS reached
        with the usual AWS settings, as the gateway reaches it, and `Decrypt` allowed on the
        keys; with the deployment's master key file too when SQS-managed queues use it."""
        kms = KmsKeyProvider.from_environment("")
        if master_key_file is None:
            return cls(kms)
        return cls(KmsWithFileKeys(kms, FileKeyProvider.from_file(Path(master_key_file))))

    def body(self, value: bytes | None, headers: RecordHeaders) -> bytes | None:
        """The record's body in clear. Raises `EnvelopeError` if it does not open."""
        if value is None or _header(headers, HEADER_ENCRYPTED) is None:
            return value
        return self._keys.open(value, PURPOSE_BODY)

    def attributes(self, headers: RecordHeaders) -> dict[str, dict[str, str]]:
        """The message attributes of an encrypted record, `{name: {"DataType": ...,
        "StringValue" | "BinaryValue" (base64): ...}}`; {} for a record without any (a
        record in clear has them as `sqs.attr.<Name>` headers)."""
        sealed = _header(headers, HEADER_ENCRYPTED_ATTRIBUTES)
        if not sealed:
            return {}
        opened: dict[str, dict[str, str]] = json.loads(self._keys.open(sealed, PURPOSE_ATTRIBUTES))
        return opened


class DecryptingDeserializer(Deserializer):
    """A value deserializer for confluent-kafka's `DeserializingConsumer`: the body in clear."""

    def __init__(self, opener: RecordOpener) -> None:
        self._opener = opener

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> Any:
        headers = getattr(ctx, "headers", None) if ctx is not None else None
        return self._opener.body(value, headers)
