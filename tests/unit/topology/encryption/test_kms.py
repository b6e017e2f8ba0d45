"""The AWS KMS key provider against moto's KMS server on 127.0.0.1 (real HTTP, real botocore
client made from the usual AWS settings): data keys made under the queue's key, unwrapped
again, asked of KMS once per reuse period, KMS's refusals by their codes, no key in any text."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from lease_store.clock import ManualClock
from tests.support.moto_kms import MotoKms, moto_kms
from topology.encryption import envelope
from topology.encryption.data_keys import DEFAULT_REUSE_S, OPEN_CACHE_S, DataKeys
from topology.encryption.keys import FileKeyProvider
from topology.encryption.kms import KmsError, KmsKeyProvider, KmsWithFileKeys


@pytest.fixture(scope="module")
def kms() -> Iterator[MotoKms]:
    with moto_kms() as server:
        yield server


@pytest.fixture(scope="module")
def default_key(kms: MotoKms) -> str:
    return kms.new_key()


@pytest.fixture(scope="module")
def provider(kms: MotoKms, default_key: str) -> Iterator[KmsKeyProvider]:
    """One client for the module (making one costs ~1 s), from the usual AWS settings."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in kms.environment(default_key).items():
            patch.setenv(name, value)
        yield KmsKeyProvider.from_environment(default_key)


def calls_of(provider: KmsKeyProvider) -> Counter[str]:
    """KMS calls the provider's client makes, by operation (botocore's own event hook)."""
    counted: Counter[str] = Counter()
    client: Any = provider._client

    def count(model: Any, **_: Any) -> None:
        counted[model.name] += 1

    client.meta.events.register("before-call.kms", count)
    return counted


def test_sqs_managed_and_alias_aws_sqs_use_the_configured_key_and_unwrap_again(
    provider: KmsKeyProvider, default_key: str
) -> None:
    for key_ref in (None, "alias/aws/sqs"):
        new = provider.new_data_key(key_ref)
        assert new.key_id == f"kms:{default_key}"
        assert len(new.plaintext) == envelope.DATA_KEY_BYTES
        assert new.plaintext not in new.wrapped
        assert provider.unwrap(new.key_id, new.wrapped) == new.plaintext


def test_a_queues_own_key_wraps_its_data_keys(provider: KmsKeyProvider, kms: MotoKms) -> None:
    own = kms.new_key()
    new = provider.new_data_key(own)
    assert new.key_id == f"kms:{own}"
    assert provider.unwrap(new.key_id, new.wrapped) == new.plaintext


def test_kms_refusals_carry_kmss_codes_and_no_key(provider: KmsKeyProvider, kms: MotoKms) -> None:
    with pytest.raises(KmsError) as missing:
        provider.new_data_key("alias/no-such-key")
    assert missing.value.code == "NotFoundException"
    # (moto does not refuse a disabled key's use; KMS's AccessDenied it gives for a data key
    # asked to open under another key than its own, as an envelope naming the wrong key is)
    new = provider.new_data_key(None)
    with pytest.raises(KmsError) as refused:
        provider.unwrap(f"kms:{kms.new_key()}", new.wrapped)
    assert refused.value.code == "AccessDeniedException"
    for error in (missing.value, refused.value):
        assert kms.secret_key not in str(error)
        assert base64.b64encode(new.plaintext).decode() not in str(error)


def test_a_kms_that_does_not_answer_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", "http://127.0.0.1:9")  # discard: refused
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-shown")
    with pytest.raises(KmsError) as failed:
        KmsKeyProvider.from_environment("alias/k").new_data_key(None)
    assert failed.value.code == "Unreachable"
    assert "not-shown" not in str(failed.value)


def test_kms_is_asked_once_per_queue_and_reuse_period_and_opened_keys_expire(
    provider: KmsKeyProvider,
) -> None:
    # Given a gateway's data keys with KMS as their provider
    clock = ManualClock()
    keys = DataKeys(provider, clock)
    calls = calls_of(provider)
    # When one queue seals many messages within its reuse period, and opens them
    key = keys.for_sealing("queue-a", None, DEFAULT_REUSE_S)
    sealed = [keys.seal(key, envelope.PURPOSE_BODY, f"m{i}".encode()) for i in range(50)]
    for _ in range(50):
        assert keys.for_sealing("queue-a", None, DEFAULT_REUSE_S) is key
    assert [keys.open(s, envelope.PURPOSE_BODY) for s in sealed][7] == b"m7"
    # Then KMS made one data key and decrypted none (the gateway made it)
    assert calls == Counter({"GenerateDataKey": 1})
    # and after the reuse period a new one is made, and an old envelope is unwrapped again
    clock.advance(max(DEFAULT_REUSE_S, OPEN_CACHE_S) * 1000)
    assert keys.for_sealing("queue-a", None, DEFAULT_REUSE_S) is not key
    assert keys.open(sealed[0], envelope.PURPOSE_BODY) == b"m0"
    assert keys.open(sealed[1], envelope.PURPOSE_BODY) == b"m1"
    assert calls == Counter({"GenerateDataKey": 2, "Decrypt": 1})


def test_with_a_master_key_file_too_sqs_managed_stays_on_the_file(
    provider: KmsKeyProvider, kms: MotoKms
) -> None:
    both = KmsWithFileKeys(provider, FileKeyProvider([bytes(32)]))
    managed = both.new_data_key(None)
    assert managed.key_id.startswith("file:")
    own = kms.new_key()
    chosen = both.new_data_key(own)
    assert chosen.key_id == f"kms:{own}"
    for new in (managed, chosen):
        assert both.unwrap(new.key_id, new.wrapped) == new.plaintext
