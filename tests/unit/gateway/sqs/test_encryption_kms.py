"""With AWS KMS (moto's server on 127.0.0.1), the gateway's KMS calls are made in a thread
before the synchronous seal or open that needs them, never on the event loop, and a refusal
is the SQS error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.common.errors import KmsNotFound
from gateway.sqs.encryption import QueueEncryption
from lease_store.clock import ManualClock
from lease_store.records import StoredMessage
from tests.support.moto_kms import MotoKms, moto_kms
from topology.catalog import QueueRecord
from topology.encryption.data_keys import DataKeys
from topology.encryption.kms import KmsKeyProvider

MESSAGE = StoredMessage("id-1", b"secret body", 1)


@pytest.fixture(scope="module")
def kms() -> Iterator[MotoKms]:
    with moto_kms() as server:
        yield server


@pytest.fixture(scope="module")
def provider(kms: MotoKms) -> Iterator[KmsKeyProvider]:
    with pytest.MonkeyPatch.context() as patch:
        key = kms.new_key()
        for name, value in kms.environment(key).items():
            patch.setenv(name, value)
        yield KmsKeyProvider.from_environment(key)


def threads_of_calls(provider: KmsKeyProvider) -> list[tuple[str, int]]:
    """(operation, thread id) of each KMS call from now on (botocore's event hook)."""
    calls: list[tuple[str, int]] = []
    client: Any = provider._client

    def record(model: Any, **_: Any) -> None:
        calls.append((model.name, threading.get_ident()))

    client.meta.events.register("before-call.kms", record)
    return calls


def _queue(**attributes: str) -> QueueRecord:
    return QueueRecord("000000000000", "orders", "cd" * 16, 1, attributes=attributes)


async def test_the_data_key_is_made_and_unwrapped_off_the_event_loop(
    provider: KmsKeyProvider, kms: MotoKms
) -> None:
    # Given a gateway with KMS, and a queue under a key of its own
    sender = QueueEncryption(DataKeys(provider, ManualClock()), kms=True)
    queue = _queue(KmsMasterKeyId=kms.new_key())
    calls = threads_of_calls(provider)
    loop_thread = threading.get_ident()
    # When it prepares the queue's first send, then seals
    assert sender.sealing_calls_kms(queue)
    await sender.ready_to_seal(queue)
    assert not sender.sealing_calls_kms(queue)
    sealed = sender.for_queue(queue, MESSAGE)
    # and another gateway (nothing cached) prepares the receive, then opens
    receiver = QueueEncryption(DataKeys(provider, ManualClock()), kms=True)
    await receiver.ready_to_open([sealed])
    opened = receiver.open(sealed)
    # Then each KMS call was made once, in a thread other than the event loop's
    assert opened == MESSAGE
    assert [name for name, _ in calls] == ["GenerateDataKey", "Decrypt"]
    assert all(thread != loop_thread for _, thread in calls)


async def test_a_key_kms_does_not_know_is_kms_not_found_before_anything_is_sent(
    provider: KmsKeyProvider,
) -> None:
    encryption = QueueEncryption(DataKeys(provider, ManualClock()), kms=True)
    queue = _queue(KmsMasterKeyId="alias/no-such-key")
    with pytest.raises(KmsNotFound, match="alias/no-such-key"):
        await encryption.ready_to_seal(queue)
