"""Which queues the gateway encrypts, and what they report: never encryption they lack."""

from __future__ import annotations

import pytest

from gateway.common import errors
from gateway.common.errors import InvalidAttributeValue, KmsNotFound
from gateway.sqs.encryption import QueueEncryption, kms_error, wanted_key
from lease_store.clock import ManualClock
from lease_store.records import AttributeValue, StoredMessage
from topology.catalog import QueueRecord
from topology.encryption.data_keys import DataKeys
from topology.encryption.keys import FileKeyProvider
from topology.encryption.kms import KmsError

MESSAGE = StoredMessage(
    "id-1", b"secret body", 1, attributes={"a": AttributeValue("String", string_value="x")}
)


def _queue(**attributes: str) -> QueueRecord:
    return QueueRecord("000000000000", "orders", "ab" * 16, 1, attributes=attributes)


def _encryption(master: bytes = bytes(32)) -> QueueEncryption:
    return QueueEncryption(DataKeys(FileKeyProvider([master]), ManualClock()))


@pytest.mark.parametrize(
    ("attributes", "wanted"),
    [
        ({}, (None, 300)),  # SQS-managed by default, as a new SQS queue
        ({"SqsManagedSseEnabled": "true", "KmsDataKeyReusePeriodSeconds": "60"}, (None, 60)),
        ({"SqsManagedSseEnabled": "false"}, None),
        ({"KmsMasterKeyId": "alias/aws/sqs"}, ("alias/aws/sqs", 300)),
        ({"KmsMasterKeyId": "k", "SqsManagedSseEnabled": "false"}, ("k", 300)),
    ],
)
def test_what_a_queue_asks_for(
    attributes: dict[str, str], wanted: tuple[str | None, int] | None
) -> None:
    assert wanted_key(attributes) == wanted


def test_an_encrypted_queue_gets_the_message_sealed_and_a_receive_opens_it() -> None:
    encryption = _encryption()
    sealed = encryption.for_queue(_queue(), MESSAGE)
    assert sealed.sealed and b"secret" not in sealed.body
    assert encryption.open(sealed) == MESSAGE


def test_a_queue_with_sse_off_keeps_the_message_in_clear() -> None:
    assert _encryption().for_queue(_queue(SqsManagedSseEnabled="false"), MESSAGE) is MESSAGE


def test_a_sealed_message_moved_to_a_queue_in_clear_is_opened() -> None:
    # Given: a dead-letter move or move task re-sends what the lease store keeps
    encryption = _encryption()
    sealed = encryption.for_queue(_queue(), MESSAGE)
    # When / Then
    assert encryption.for_queue(_queue(SqsManagedSseEnabled="false"), sealed) == MESSAGE


def test_without_a_key_provider_nothing_is_sealed_and_no_queue_claims_encryption() -> None:
    # Given
    encryption = QueueEncryption()
    values = {"SqsManagedSseEnabled": "true", "KmsMasterKeyId": "k"}
    # When
    encryption.reported(values)
    # Then
    assert values == {"SqsManagedSseEnabled": "false"}
    assert encryption.for_queue(_queue(), MESSAGE) is MESSAGE
    with pytest.raises(InvalidAttributeValue, match="KmsMasterKeyId"):
        encryption.check_settable({"KmsMasterKeyId": "k"})
    encryption.check_settable({"SqsManagedSseEnabled": "true"})  # accepted, reported false


def test_with_a_key_provider_the_attributes_are_reported_as_set() -> None:
    values = {"SqsManagedSseEnabled": "true"}
    _encryption().reported(values)
    assert values == {"SqsManagedSseEnabled": "true"}


def test_a_message_under_another_master_key_is_kms_not_found() -> None:
    sealed = _encryption(bytes(32)).for_queue(_queue(), MESSAGE)
    with pytest.raises(KmsNotFound, match="file:"):
        _encryption(bytes(range(32))).open(sealed)
    with pytest.raises(KmsNotFound, match="no master key"):
        QueueEncryption().open(sealed)


def test_with_a_master_key_file_only_no_kms_key_is_claimed() -> None:
    # Given a gateway whose only key is its master key file
    encryption = _encryption()
    # When a queue asks for a KMS key, then it is refused, naming what is missing
    with pytest.raises(InvalidAttributeValue, match="KQS_KMS_KEY_ID"):
        encryption.check_settable({"KmsMasterKeyId": "alias/orders"})
    # and a queue that holds one from before reports what its messages have: the file's key
    values = {"SqsManagedSseEnabled": "false", "KmsMasterKeyId": "alias/orders"}
    encryption.reported(values)
    assert values == {"SqsManagedSseEnabled": "true"}
    sealed = encryption.for_queue(_queue(KmsMasterKeyId="alias/orders"), MESSAGE)
    assert encryption.open(sealed) == MESSAGE


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("NotFoundException", errors.KmsNotFound),
        ("DisabledException", errors.KmsDisabled),
        ("AccessDeniedException", errors.KmsAccessDenied),
        ("KMSInvalidStateException", errors.KmsInvalidState),
        ("ThrottlingException", errors.KmsThrottled),
        ("Unreachable", errors.ServiceUnavailable),
    ],
)
def test_kms_refusals_answer_as_sqs_does(code: str, error: type[errors.SqsError]) -> None:
    answer = kms_error(KmsError(code, "key arn:aws:kms:us-east-1:1:key/k"))
    assert type(answer) is error
    assert "arn:aws:kms:us-east-1:1:key/k" in answer.message
