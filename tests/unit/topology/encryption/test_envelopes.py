"""Envelopes, data keys and master keys: what seals opens, nothing else does, keys rotate."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from lease_store.clock import ManualClock
from topology.encryption.data_keys import DataKeys
from topology.encryption.envelope import (
    MAGIC,
    PURPOSE_ATTRIBUTES,
    PURPOSE_BODY,
    EnvelopeError,
    UnknownMasterKey,
    parse,
)
from topology.encryption.keys import (
    FileKeyProvider,
    NewDataKey,
    create_master_key_file,
    key_id_of,
    read_master_keys,
)

MASTER = bytes(range(32))
OTHER_MASTER = bytes(range(1, 33))


class CountingProvider(FileKeyProvider):
    """A file provider that counts the data keys it makes and unwraps."""

    def __init__(self, keys: list[bytes]) -> None:
        super().__init__(keys)
        self.made = 0
        self.unwrapped = 0

    def new_data_key(self, key_ref: str | None) -> NewDataKey:
        self.made += 1
        return super().new_data_key(key_ref)

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        self.unwrapped += 1
        return super().unwrap(key_id, wrapped)


def test_a_sealed_body_opens_to_its_plaintext_and_does_not_contain_it() -> None:
    # Given
    keys = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    plaintext = b"marker-7f3a " * 20
    # When
    sealed = keys.seal(keys.for_sealing("q", None, 300), PURPOSE_BODY, plaintext)
    # Then
    assert sealed.startswith(MAGIC)
    assert b"marker-7f3a" not in sealed
    assert keys.open(sealed, PURPOSE_BODY) == plaintext


def test_another_process_with_the_master_key_opens_the_envelope() -> None:
    # Given: the envelope carries the wrapped data key, so a fresh reader needs only the master
    sealed = DataKeys(FileKeyProvider([MASTER]), ManualClock()).seal(
        DataKeys(FileKeyProvider([MASTER]), ManualClock()).for_sealing("q", None, 300),
        PURPOSE_BODY,
        b"hello",
    )
    # When / Then
    assert DataKeys(FileKeyProvider([MASTER]), ManualClock()).open(sealed, PURPOSE_BODY) == b"hello"


def test_a_reader_without_the_master_key_is_told_which_key_it_lacks() -> None:
    keys = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    sealed = keys.seal(keys.for_sealing("q", None, 300), PURPOSE_BODY, b"hello")
    with pytest.raises(UnknownMasterKey) as raised:
        DataKeys(FileKeyProvider([OTHER_MASTER]), ManualClock()).open(sealed, PURPOSE_BODY)
    assert raised.value.key_id == key_id_of(MASTER)


@pytest.mark.parametrize("where", ["purpose", "key id", "wrapped key", "nonce", "ciphertext"])
def test_a_changed_byte_anywhere_fails_the_envelope(where: str) -> None:
    # Given
    keys = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    sealed = bytearray(keys.seal(keys.for_sealing("q", None, 300), PURPOSE_BODY, b"hello"))
    _, key_id, wrapped, nonce_at = parse(bytes(sealed))
    at = {
        "purpose": 4,
        "key id": 6 + len(key_id) - 1,
        "wrapped key": nonce_at - 1,
        "nonce": nonce_at,
        "ciphertext": len(sealed) - 1,
    }[where]
    # When
    sealed[at] ^= 0x01
    # Then: a fresh reader (no cached data key), so the wrapped key is unwrapped again
    fresh = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    with pytest.raises(EnvelopeError):
        fresh.open(bytes(sealed), PURPOSE_BODY)


def test_an_attributes_envelope_does_not_open_as_a_body() -> None:
    keys = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    sealed = keys.seal(keys.for_sealing("q", None, 300), PURPOSE_ATTRIBUTES, b"{}")
    with pytest.raises(EnvelopeError):
        keys.open(sealed, PURPOSE_BODY)


def test_a_queue_keeps_its_data_key_for_the_reuse_period_then_takes_a_new_one() -> None:
    # Given
    clock = ManualClock()
    provider = CountingProvider([MASTER])
    keys = DataKeys(provider, clock)
    first = keys.for_sealing("q", None, 60)
    # When / Then: reused within the period, per queue
    clock.advance(59_999)
    assert keys.for_sealing("q", None, 60) is first
    assert keys.for_sealing("other", None, 60) is not first
    assert provider.made == 2
    # When / Then: a new one once the period is over; envelopes of both still open
    old = keys.seal(first, PURPOSE_BODY, b"old")
    clock.advance(1)
    second = keys.for_sealing("q", None, 60)
    assert second is not first
    assert parse(second.body_head + bytes(28))[2] != parse(first.body_head + bytes(28))[2]
    assert keys.open(old, PURPOSE_BODY) == b"old"


def test_envelopes_of_one_data_key_unwrap_it_once() -> None:
    # Given
    writer = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    key = writer.for_sealing("q", None, 300)
    sealed = [writer.seal(key, PURPOSE_BODY, b"m%d" % i) for i in range(5)]
    provider = CountingProvider([MASTER])
    reader = DataKeys(provider, ManualClock())
    # When
    opened = [reader.open(s, PURPOSE_BODY) for s in sealed]
    # Then
    assert opened == [b"m%d" % i for i in range(5)]
    assert provider.unwrapped == 1


def test_after_a_master_key_rotation_old_envelopes_still_open(tmp_path: Path) -> None:
    # Given: sealed under the first master key
    before = DataKeys(FileKeyProvider([MASTER]), ManualClock())
    old = before.seal(before.for_sealing("q", None, 300), PURPOSE_BODY, b"old")
    # When: a new current key is put first, the old one kept below it
    path = tmp_path / "master.key"
    path.write_text(
        "# rotated\n"
        + base64.b64encode(OTHER_MASTER).decode()
        + "\n\n"
        + base64.b64encode(MASTER).decode()
        + "\n"
    )
    after = DataKeys(FileKeyProvider.from_file(path), ManualClock())
    new = after.seal(after.for_sealing("q", None, 300), PURPOSE_BODY, b"new")
    # Then
    assert after.open(old, PURPOSE_BODY) == b"old"
    assert parse(new)[1] == key_id_of(OTHER_MASTER)
    assert after.open(new, PURPOSE_BODY) == b"new"


def test_a_master_key_file_is_made_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    # Given
    path = tmp_path / "data" / "master.key"
    # When
    made = create_master_key_file(path)
    again = create_master_key_file(path)
    # Then
    assert (made, again) == (True, False)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    (key,) = read_master_keys(path)
    assert len(key) == 32


def test_a_master_key_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        FileKeyProvider([b"short"])
