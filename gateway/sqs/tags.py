"""Queue tag limits (TagQueue, CreateQueue tags)."""

from __future__ import annotations

from gateway.common import limits
from gateway.common.errors import InvalidParameterValue


def validate_tags(
    tags: dict[str, str], existing: dict[str, str] | None = None, queue_name: str = ""
) -> None:
    for key, value in tags.items():
        if not 1 <= len(key) <= limits.MAX_TAG_KEY_LENGTH:
            raise InvalidParameterValue(
                f"Tag key must be between 1 and {limits.MAX_TAG_KEY_LENGTH} characters long."
            )
        if len(value) > limits.MAX_TAG_VALUE_LENGTH:
            raise InvalidParameterValue(
                f"Tag value must be at most {limits.MAX_TAG_VALUE_LENGTH} characters long."
            )
    if len({**(existing or {}), **tags}) > limits.MAX_TAGS:
        raise InvalidParameterValue(f"Too many tags added for queue {queue_name}.")
