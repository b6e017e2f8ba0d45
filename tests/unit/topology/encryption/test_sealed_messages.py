"""A sealed message through the record format and the lease store's stored form, and opened
again by the gateway or a Kafka-native reader."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from pathlib import Path

from confluent_kafka.serialization import MessageField, SerializationContext

from lease_store.clock import ManualClock
from lease_store.records import AttributeValue, StoredMessage
from topology.encryption.data_keys import DataKeys
from topology.encryption.envelope import HEADER_ENCRYPTED, HEADER_ENCRYPTED_ATTRIBUTES
from topology.encryption.keys import FileKeyProvider
from topology.encryption.messages import open_message, seal_message
from topology.encryption.reader import DecryptingDeserializer, RecordOpener
from topology.record_format import from_record, to_headers

MASTER = bytes(range(32))
MARKER = b"marker-5e1c"
MESSAGE = StoredMessage(
    message_id="id-1",
    body=MARKER + b" body",
    sent_ms=1_700_000_000_000,
    attributes={
        "note": AttributeValue("String", string_value=MARKER.decode()),
        "blob": AttributeValue("Binary", binary_value=MARKER),
    },
    sender_id="AIDATEST",
    message_group_id="g",
)


def _sealed(message: StoredMessage = MESSAGE) -> StoredMessage:
    keys = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    return seal_message(message, keys, keys.for_sealing("q", None, 300))


def _fresh_keys() -> DataKeys:
    return DataKeys(FileKeyProvider([MASTER]), ManualClock())


def test_a_sealed_message_keeps_its_metadata_and_hides_body_and_attributes() -> None:
    sealed = _sealed()
    assert sealed.sealed and sealed.attributes == {}
    assert MARKER not in sealed.body and MARKER not in sealed.sealed_attributes
    assert (sealed.message_id, sealed.sent_ms, sealed.message_group_id) == (
        "id-1",
        MESSAGE.sent_ms,
        "g",
    )


def test_the_lease_stores_form_of_a_sealed_message_holds_neither_marker_nor_digest() -> None:
    # Given
    sealed = _sealed()
    # When
    raw = sealed.encode()
    # Then: nothing of the body, not even its MD5 (it would confirm a guessed body)
    assert MARKER not in raw
    assert hashlib.md5(MESSAGE.body).digest() not in raw
    decoded = StoredMessage.decode(raw)
    assert decoded == sealed
    assert StoredMessage.id_of(raw) == "id-1"
    assert open_message(decoded, _fresh_keys()) == MESSAGE


def test_a_sealed_message_without_attributes_reads_back_as_written() -> None:
    sealed = _sealed(StoredMessage(message_id="id-2", body=MARKER, sent_ms=5))
    assert sealed.sealed_attributes == b""
    decoded = StoredMessage.decode(sealed.encode())
    assert decoded == sealed
    assert open_message(decoded, _fresh_keys()).body == MARKER


def test_a_sealed_replayed_message_reads_back_as_written() -> None:
    # A replay's origin makes format 4; sealing sets the tag's bit on either format
    replayed = replace(MESSAGE, replay_of='{"task":"t"}')
    sealed = _sealed(replayed)
    decoded = StoredMessage.decode(sealed.encode())
    assert decoded == sealed
    assert StoredMessage.id_of(sealed.encode()) == "id-1"
    assert open_message(decoded, _fresh_keys()) == replayed


def test_a_sealed_record_carries_no_clear_attribute_and_reads_back_sealed() -> None:
    # Given
    sealed = _sealed()
    # When
    headers = to_headers(sealed)
    message = from_record("kqs.t", 0, 7, b"id-1", sealed.body, sealed.sent_ms, headers)
    # Then
    names = [name for name, _ in headers]
    assert not [n for n in names if n.startswith("sqs.attr.")]
    assert HEADER_ENCRYPTED in names and HEADER_ENCRYPTED_ATTRIBUTES in names
    assert all(MARKER not in value for _, value in headers)
    assert message == sealed
    assert open_message(message, _fresh_keys()) == MESSAGE


def test_a_record_in_clear_is_not_taken_for_a_sealed_one() -> None:
    headers = to_headers(MESSAGE)
    message = from_record("kqs.t", 0, 7, b"id-1", MESSAGE.body, MESSAGE.sent_ms, headers)
    assert not message.sealed
    assert message == MESSAGE


def test_a_kafka_native_reader_opens_body_and_attributes_with_the_master_key(
    tmp_path: Path,
) -> None:
    # Given: a master key file as a reader would be given it
    key_file = tmp_path / "master.key"
    key_file.write_text(base64.b64encode(MASTER).decode() + "\n")
    sealed = _sealed()
    headers = to_headers(sealed)
    opener = RecordOpener.from_master_key_file(key_file)
    as_context: list[tuple[str, str | bytes | None]] = list(headers)

    # When
    body = DecryptingDeserializer(opener)(
        sealed.body, SerializationContext("kqs.t", MessageField.VALUE, as_context)
    )
    attributes = opener.attributes(headers)
    # Then
    assert body == MESSAGE.body
    assert attributes["note"] == {"DataType": "String", "StringValue": MARKER.decode()}
    assert attributes["blob"]["DataType"] == "Binary"
    # A record in clear passes through
    assert opener.body(b"plain", to_headers(MESSAGE)) == b"plain"
