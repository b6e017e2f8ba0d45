"""Receipt handles: an authenticated, opaque encoding of message coordinates and epoch."""

from __future__ import annotations

import base64
import hashlib
import hmac
import string
import struct
from collections.abc import Callable

import pytest

from lease_store.errors import ReceiptHandleInvalid
from lease_store.handles import ReceiptHandle, ReceiptHandleCodec
from tests.support.builders import OTHER_SECRET, SECRET, a_receipt_handle

ALPHABET = string.ascii_letters + string.digits + "+/"

Reshape = Callable[[str], str]


@pytest.fixture
def codec() -> ReceiptHandleCodec:
    return ReceiptHandleCodec(SECRET)


def with_char_replaced(text: str, position: int) -> str:
    """`text` with the character at `position` replaced by the next one of the alphabet."""
    old = text[position]
    new = ALPHABET[(ALPHABET.index(old) + 1) % len(ALPHABET)]
    index = position % len(text)
    return text[:index] + new + text[index + 1 :]


def assert_invalid(codec: ReceiptHandleCodec, text: str) -> None:
    with pytest.raises(ReceiptHandleInvalid) as raised:
        codec.decode(text)
    assert raised.value.handle == text


# -- round trip ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "handle",
    [
        a_receipt_handle(),
        a_receipt_handle(queue=0, partition=0, offset=0, epoch=0),
        a_receipt_handle(queue=2**128 - 1, partition=2**32 - 1, offset=2**63 - 1, epoch=2**32 - 1),
        ReceiptHandle(incarnation=bytes(range(16)), partition=7, offset=123_456_789, epoch=3),
    ],
)
def test_a_handle_decodes_to_the_coordinates_it_was_made_from(
    codec: ReceiptHandleCodec, handle: ReceiptHandle
) -> None:
    # Given
    text = codec.encode(handle)

    # When
    decoded = codec.decode(text)

    # Then
    assert decoded == handle


def test_a_handle_is_standard_base64_without_padding_or_dashes(codec: ReceiptHandleCodec) -> None:
    # Given handles of many offsets (the Python Extended Client splits handles on "-")
    texts = [codec.encode(a_receipt_handle(offset=offset)) for offset in range(200)]

    # Then every one is SQS's alphabet, without "-", "_" or "="
    assert all(text and set(text) <= set(ALPHABET) for text in texts)


def test_a_handle_issued_in_the_url_safe_alphabet_is_still_accepted(
    codec: ReceiptHandleCodec,
) -> None:
    # Given a handle as earlier versions issued it
    handle = a_receipt_handle()
    old = codec.encode(handle).replace("+", "-").replace("/", "_")

    # Then
    assert codec.decode(old) == handle


def test_each_receive_of_the_same_message_gets_a_different_handle(
    codec: ReceiptHandleCodec,
) -> None:
    # Given two receives of one message
    first, second = a_receipt_handle(epoch=1), a_receipt_handle(epoch=2)

    # When
    first_text, second_text = codec.encode(first), codec.encode(second)

    # Then
    assert first_text != second_text
    assert codec.decode(first_text).epoch == 1
    assert codec.decode(second_text).epoch == 2


def test_a_codec_with_the_same_secret_decodes_handles_of_another_instance() -> None:
    # Given a handle made before a restart
    text = ReceiptHandleCodec(SECRET).encode(a_receipt_handle())

    # When
    decoded = ReceiptHandleCodec(SECRET).decode(text)

    # Then
    assert decoded == a_receipt_handle()


def test_handles_issued_long_ago_are_still_authenticated_and_decoded() -> None:
    # Given a codec that remembers the 2 handles it issued last (and 2 before them)
    codec = ReceiptHandleCodec(SECRET, remembered=2)
    handles = [ReceiptHandle(b"i" * 16, 0, offset, 1) for offset in range(7)]
    texts = [codec.encode(handle) for handle in handles]

    # When every one comes back, the oldest long forgotten
    decoded = [codec.decode(text) for text in texts]

    # Then each is decoded, and a forgotten one that was tampered with is still refused
    assert decoded == handles
    assert_invalid(codec, with_char_replaced(texts[0], 30))


def test_a_secret_shorter_than_16_bytes_is_refused() -> None:
    # Given / When / Then
    with pytest.raises(ValueError, match="at least 16 bytes"):
        ReceiptHandleCodec(b"too-short")


# -- invalid handles ----------------------------------------------------------------------


# The last character carries the final 2 bits of the MAC and 4 padding bits: changing it must
# be refused too, or one issued handle has several accepted spellings.
@pytest.mark.parametrize("position", [0, 1, 20, 40, -2, -1], ids=lambda p: f"at {p}")
def test_a_handle_with_a_flipped_character_is_invalid(
    codec: ReceiptHandleCodec, position: int
) -> None:
    # Given
    text = codec.encode(a_receipt_handle())

    # When
    tampered = with_char_replaced(text, position)

    # Then
    assert tampered != text
    assert_invalid(codec, tampered)


@pytest.mark.parametrize(
    "garbage",
    [
        "not a receipt handle",
        "AQID",
        "!!!!",
        "====",
        "%" * 66,
        "é" * 66,
        "A" * 66,
    ],
)
def test_garbage_text_is_an_invalid_handle(codec: ReceiptHandleCodec, garbage: str) -> None:
    # Given / When / Then
    assert_invalid(codec, garbage)


def test_an_empty_handle_is_invalid(codec: ReceiptHandleCodec) -> None:
    # Given / When / Then
    assert_invalid(codec, "")


@pytest.mark.parametrize(
    "reshape",
    [
        lambda text: text[:-4],
        lambda text: text[:-1],
        lambda text: text[4:],
        lambda text: text + "AAAA",
        lambda text: text + text,
    ],
    ids=["truncated by 3 bytes", "last char missing", "head cut", "extended", "doubled"],
)
def test_a_handle_of_the_wrong_length_is_invalid(
    codec: ReceiptHandleCodec, reshape: Reshape
) -> None:
    # Given
    text = codec.encode(a_receipt_handle())

    # When
    reshaped = reshape(text)

    # Then
    assert_invalid(codec, reshaped)


def test_a_handle_made_under_another_secret_is_invalid(codec: ReceiptHandleCodec) -> None:
    # Given
    foreign = ReceiptHandleCodec(OTHER_SECRET).encode(a_receipt_handle())

    # When / Then
    assert_invalid(codec, foreign)


def test_a_handle_of_another_queue_incarnation_cannot_be_made_by_editing_one(
    codec: ReceiptHandleCodec,
) -> None:
    # Given a genuine handle, with the incarnation bytes swapped for another queue's
    raw = bytearray(base64.urlsafe_b64decode(codec.encode(a_receipt_handle(queue=1)) + "=="))
    raw[1:17] = (2).to_bytes(16, "big")
    forged = base64.urlsafe_b64encode(bytes(raw)).decode("ascii").rstrip("=")

    # When / Then
    assert_invalid(codec, forged)


def test_a_correctly_signed_handle_of_an_unknown_version_is_invalid(
    codec: ReceiptHandleCodec,
) -> None:
    # Given handles laid out and signed like versions 1 and 2, but labelled version 3
    payload = struct.pack(">B16sIqI", 3, bytes(16), 0, 0, 1)
    for mac in (_hmac_sha256(payload), _keyed_blake2b(payload)):
        text = base64.b64encode(payload + mac).decode("ascii").rstrip("=")

        # When / Then
        assert_invalid(codec, text)


def _hmac_sha256(payload: bytes) -> bytes:
    """Version 1's MAC."""
    return hmac.new(SECRET, payload, hashlib.sha256).digest()[:16]


def _keyed_blake2b(payload: bytes) -> bytes:
    """Version 2's MAC, as `lease_store/handles.py` derives its key."""
    key = hashlib.sha256(b"kqs receipt handle v2\0" + SECRET).digest()
    return hashlib.blake2b(payload, key=key, digest_size=16).digest()


def test_handles_are_issued_as_version_2_with_a_keyed_blake2b_mac(
    codec: ReceiptHandleCodec,
) -> None:
    # When
    raw = base64.b64decode(codec.encode(a_receipt_handle()) + "==")

    # Then
    payload, mac = raw[:33], raw[33:]
    assert payload[0] == 2
    assert mac == _keyed_blake2b(payload)


@pytest.mark.parametrize("urlsafe", [False, True], ids=["standard", "url-safe"])
def test_a_version_1_handle_signed_with_hmac_sha256_is_still_accepted(
    codec: ReceiptHandleCodec, urlsafe: bool
) -> None:
    # Given a handle an earlier version issued (HMAC-SHA256), before an upgrade
    handle = a_receipt_handle(queue=5, partition=2, offset=77, epoch=4)
    payload = struct.pack(">B16sIqI", 1, handle.incarnation, 2, 77, 4)
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(payload + _hmac_sha256(payload)).decode("ascii").rstrip("=")

    # When / Then: it still decodes, and tampered with it does not
    assert codec.decode(text) == handle
    assert_invalid(codec, with_char_replaced(text, 30))


def test_a_version_1_handle_with_a_blake2b_mac_is_invalid(codec: ReceiptHandleCodec) -> None:
    # Given a version 2 MAC on a payload relabelled version 1: each version has its own MAC
    payload = struct.pack(">B16sIqI", 1, bytes(16), 0, 0, 1)
    text = base64.b64encode(payload + _keyed_blake2b(payload)).decode("ascii").rstrip("=")

    # When / Then
    assert_invalid(codec, text)


def test_a_handle_is_accepted_only_in_the_exact_text_it_was_issued_as(
    codec: ReceiptHandleCodec,
) -> None:
    # Given a genuine handle with characters from outside its alphabet inserted
    text = codec.encode(a_receipt_handle())
    padded = text[:10] + "!!!!" + text[10:]

    # When / Then
    assert_invalid(codec, padded)
