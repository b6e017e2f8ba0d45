"""Validation of message attributes and bodies, and the filters ReceiveMessage applies."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from gateway.common import limits
from gateway.common.errors import InvalidMessageContents, InvalidParameterValue, MissingParameter
from lease_store.records import AttributeValue

# SQS also accepts Latin letters with diacritics (U+00C0-U+017F), e.g. "attr.1øßä".
_NAME = re.compile("^[A-Za-z0-9_.\u00c0-\u017f-]+$")
_DATA_TYPE = re.compile(r"^(String|Number|Binary)(\..+)?$")
_INVALID_BODY_CHAR = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# The ASCII part of those ranges: tab, newline, carriage return, and 0x20-0x7F.
_ALLOWED_ASCII = b"\t\n\r" + bytes(range(0x20, 0x80))
_RESERVED_PREFIXES = ("aws.", "amazon.")

SYSTEM_ATTRIBUTE_NAMES = (
    "SenderId",
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
    "MessageGroupId",
    "MessageDeduplicationId",
    "SequenceNumber",
    # KQS's own, on a message a replay task re-sent (gateway/sqs/replay/): the original's
    # MessageId and SentTimestamp, so a consumer can tell a replay.
    "KqsReplayOfMessageId",
    "KqsReplayOfSentTimestamp",
)


def validate_body(body: str) -> None:
    if body == "":
        raise MissingParameter.named("MessageBody")
    if body.isascii():
        # Most bodies: what is left once the allowed bytes are deleted is what is invalid
        # (one C pass over the bytes, ~2x faster than isprintable() on 1 KB).
        if body.encode().translate(None, _ALLOWED_ASCII):
            raise _invalid_body()
        return
    # Printable characters all lie in the allowed ranges; isprintable() reads a body many
    # times faster than the regular expression, which is left for the rest (tabs, newlines).
    if not body.isprintable() and _INVALID_BODY_CHAR.search(body):
        raise _invalid_body()


def _invalid_body() -> InvalidMessageContents:
    return InvalidMessageContents(
        "Invalid characters found. Valid values are: #x9 | #xA | #xD | #x20 to #xD7FF | "
        "#xE000 to #xFFFD | #x10000 to #x10FFFF"
    )


def _check_name(name: str) -> None:
    """Message attribute names, with the texts SQS answers (see docs/ARCHITECTURE.md)."""
    if name == "":
        raise InvalidParameterValue(
            "The request must contain non-empty message (user) attribute names."
        )
    if len(name) > limits.MAX_ATTRIBUTE_NAME_LENGTH:
        raise InvalidParameterValue("Message (user) attribute names must be shorter than 256 Bytes")
    if not _NAME.match(name):
        # SQS's own text, its odd wording and trailing space included.
        raise InvalidParameterValue(
            "Message (user) attributes name can only contain upper and lower score "
            "characters, digits, periods, hyphens and underscores. "
        )
    if (
        name.lower().startswith(_RESERVED_PREFIXES)
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
    ):
        raise InvalidParameterValue(
            "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. "
            "These strings are reserved for internal use. Additionally, they cannot start or "
            "end with '.'."
        )


def _check_number(name: str, text: str) -> None:
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite():
        raise InvalidParameterValue(
            f"Can't cast the value of message (user) attribute '{name}' to a number."
        )
    digits = len(number.as_tuple().digits)
    if digits > 38 or not Decimal("-1e128") <= number <= Decimal("1e126"):
        raise InvalidParameterValue(
            f"Value {text} for message (user) attribute '{name}' is out of range: up to 38 "
            "digits of precision, between -10^128 and 10^126."
        )


def parse_attributes(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, AttributeValue]:
    """Typed, validated message attributes from the JSON-shaped `MessageAttributes` map."""
    if len(raw) > limits.MAX_MESSAGE_ATTRIBUTES:
        raise InvalidParameterValue(
            f"Number of message attributes [{len(raw)}] exceeds the allowed maximum "
            f"[{limits.MAX_MESSAGE_ATTRIBUTES}]."
        )
    out: dict[str, AttributeValue] = {}
    for name, value in raw.items():
        _check_name(name)
        data_type = value.get("DataType")
        if not isinstance(data_type, str) or not data_type:
            raise InvalidParameterValue(
                f"The message attribute '{name}' must contain a non-empty attribute type."
            )
        if len(data_type) > limits.MAX_ATTRIBUTE_NAME_LENGTH or not _DATA_TYPE.match(data_type):
            raise InvalidParameterValue(
                f"The type of message (user) attribute '{name}' is invalid. You must use only "
                "the following supported type prefixes: Binary, Number, String."
            )
        base_type = data_type.split(".", 1)[0]
        if base_type == "Binary":
            encoded = value.get("BinaryValue")
            if not isinstance(encoded, str) or encoded == "":
                raise InvalidParameterValue(
                    f"Message (user) attribute '{name}' must contain a non-empty value of type "
                    "'Binary'."
                )
            try:
                decoded = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidParameterValue(
                    f"The message attribute '{name}' has an invalid binary value."
                ) from None
            out[name] = AttributeValue(data_type, binary_value=decoded)
        else:
            text = value.get("StringValue")
            if not isinstance(text, str) or text == "":
                raise InvalidParameterValue(
                    f"Message (user) attribute '{name}' must contain a non-empty value of type "
                    f"'{base_type}'."
                )
            if base_type == "Number":
                _check_number(name, text)
            elif _INVALID_BODY_CHAR.search(text):
                raise InvalidParameterValue(
                    f"The message attribute '{name}' contains invalid characters."
                )
            out[name] = AttributeValue(data_type, string_value=text)
    return out


def message_size(body: str, attributes: Mapping[str, AttributeValue]) -> int:
    """UTF-8 bytes of the body plus every attribute name, type and value (SQS's measure)."""
    size = len(body) if body.isascii() else len(body.encode())
    for name, value in attributes.items():
        size += len(name.encode()) + len(value.data_type.encode())
        if value.binary_value is not None:
            size += len(value.binary_value)
        else:
            size += len((value.string_value or "").encode())
    return size


def select_message_attributes(
    attributes: Mapping[str, AttributeValue], requested: list[str]
) -> dict[str, AttributeValue]:
    """Apply ReceiveMessage's MessageAttributeNames: `All`, `.*`, `prefix.*` or exact names."""
    if not requested:
        return {}
    if "All" in requested or ".*" in requested or "*" in requested:
        return dict(attributes)
    # `Hel.*` selects every name starting with `Hel` (`Hello`, `Help.Me`), as SQS does.
    prefixes = tuple(r[:-2] for r in requested if r.endswith(".*"))
    exact = set(requested)
    return {
        name: value
        for name, value in attributes.items()
        if name in exact or (prefixes and name.startswith(prefixes))
    }
