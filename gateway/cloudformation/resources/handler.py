"""What a resource type's handler is: its properties, which of them replace the resource when
they change, and create / update / delete against SQS (`sqs_calls.py`)."""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.cloudformation.errors import ResourceFailed
from gateway.cloudformation.sqs_calls import SqsCalls

_SUFFIX_ALPHABET = string.ascii_uppercase + string.digits


def random_suffix() -> str:
    """The random part of a generated physical name: 13 characters, as AWS's
    (e.g. `mystack-MyQueue-1VF9BKQH5BJVI`)."""
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(13))


@dataclass
class HandlerEnv:
    sqs: SqsCalls
    stack_name: str
    logical_id: str
    stack_tags: dict[str, str] = field(default_factory=dict)
    suffix: Callable[[], str] = random_suffix

    def physical_name(self, max_length: int, ending: str = "") -> str:
        """`stackname-LogicalId-RANDOM[ending]` in at most `max_length` characters, the stack
        name and the logical id shortened if need be (as AWS shortens them)."""
        suffix = self.suffix()
        room = max_length - len(suffix) - len(ending) - 2
        stack_part = self.stack_name[: max(room // 2, room - len(self.logical_id))]
        logical_part = self.logical_id[: room - len(stack_part)]
        return f"{stack_part}-{logical_part}-{suffix}{ending}"


@dataclass(frozen=True)
class Made:
    physical_id: str
    attributes: dict[str, Any]


class Handler(Protocol):
    type_name: str
    properties: frozenset[str]
    required: frozenset[str]
    replaced_by: frozenset[str]

    async def create(self, env: HandlerEnv, props: dict[str, Any]) -> Made: ...

    async def update(
        self, env: HandlerEnv, physical_id: str, old: dict[str, Any], new: dict[str, Any]
    ) -> Made: ...

    async def delete(self, env: HandlerEnv, physical_id: str, props: dict[str, Any]) -> None: ...


def check_properties(handler: Handler, logical_id: str, props: dict[str, Any]) -> None:
    """Refuse a property the type does not have, or a required one missing (AWS's words)."""
    for name in props:
        if name not in handler.properties:
            raise ResourceFailed(f"Encountered unsupported property {name}")
    for name in sorted(handler.required):
        if name not in props:
            raise ResourceFailed(
                f"Properties validation failed for resource {logical_id} with message: "
                f"#: required key [{name}] not found"
            )


def needs_replacement(handler: Handler, old: dict[str, Any], new: dict[str, Any]) -> bool:
    return any(old.get(name) != new.get(name) for name in handler.replaced_by)


def text(value: Any) -> str:
    """A property value as the SQS attribute string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def policy_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
