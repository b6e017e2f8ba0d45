"""The message body's character rule and SQS's size measure, character by character.

SQS accepts #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF; an
ASCII body is checked by a faster path than the rest, so both paths are walked here.
"""

from __future__ import annotations

import pytest

from gateway.common.errors import InvalidMessageContents
from gateway.sqs.message_attributes import message_size, validate_body
from lease_store.records import AttributeValue


def _allowed(code: int) -> bool:
    return (
        code in (0x9, 0xA, 0xD)
        or 0x20 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


def _accepted(body: str) -> bool:
    try:
        validate_body(body)
    except InvalidMessageContents:
        return False
    return True


@pytest.mark.parametrize("around", ["", "plain text ", "non-ASCII é "])
def test_every_character_below_0x3000_is_judged_by_the_sqs_ranges(around: str) -> None:
    wrong = [
        code
        for code in range(0x3000)
        if _accepted(f"{around}{chr(code)}{around}") != _allowed(code)
    ]
    assert wrong == []


def test_surrogates_and_the_last_planes_are_judged_by_the_sqs_ranges() -> None:
    for code in (0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFD, 0xFFFE, 0xFFFF, 0x10000, 0x10FFFF):
        assert _accepted(f"x{chr(code)}") == _allowed(code), hex(code)


def test_the_size_counts_utf8_bytes_of_the_body_and_every_attribute_part() -> None:
    assert message_size("abc", {}) == 3
    assert message_size("é€😀", {}) == 2 + 3 + 4
    attributes = {
        "n": AttributeValue("String", string_value="vé"),
        "b": AttributeValue("Binary", binary_value=b"\x00\x01"),
    }
    assert message_size("x", attributes) == 1 + (1 + 6 + 3) + (1 + 6 + 2)
