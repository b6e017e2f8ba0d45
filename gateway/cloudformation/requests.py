"""Reading the members CloudFormation's actions share from an awsQuery request (the tree
`wire.to_tree` makes): the template, the parameters, the tags, the stack's name."""

from __future__ import annotations

import re
from typing import Any

from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.parameters import GivenParameter
from gateway.cloudformation.records import Stack
from gateway.cloudformation.store import StackStore

_NAME = re.compile(r"[a-zA-Z][-a-zA-Z0-9]*")
MAX_NAME_LENGTH = 128


def text(params: dict[str, Any], name: str) -> str | None:
    value = params.get(name)
    return value if isinstance(value, str) else None


def required(params: dict[str, Any], name: str) -> str:
    value = text(params, name)
    if not value:
        member = name[0].lower() + name[1:]
        raise ValidationError(
            f"1 validation error detected: Value null at '{member}' failed to satisfy "
            "constraint: Member must not be null"
        )
    return value


def flag(params: dict[str, Any], name: str) -> bool:
    return str(params.get(name, "")).lower() == "true"


def strings(params: dict[str, Any], name: str) -> list[str]:
    value = params.get(name)
    return [str(v) for v in value] if isinstance(value, list) else []


def checked_name(name: str, member: str) -> str:
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise ValidationError(
            f"1 validation error detected: Value '{name}' at '{member}' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: "
            "[a-zA-Z][-a-zA-Z0-9]*"
        )
    return name


def given_parameters(params: dict[str, Any]) -> list[GivenParameter]:
    out = []
    for item in params.get("Parameters", []) or []:
        if not isinstance(item, dict) or "ParameterKey" not in item:
            continue
        previous = str(item.get("UsePreviousValue", "")).lower() == "true"
        out.append(GivenParameter(item["ParameterKey"], item.get("ParameterValue"), previous))
    return out


def tags(params: dict[str, Any]) -> dict[str, str] | None:
    """The request's Tags, or None when it names none (an update then keeps the stack's)."""
    if "Tags" not in params:
        return None
    items = params["Tags"] if isinstance(params["Tags"], list) else []
    return {
        str(t["Key"]): str(t.get("Value", "")) for t in items if isinstance(t, dict) and "Key" in t
    }


def template_body(params: dict[str, Any], previous: Stack | None = None) -> str:
    """TemplateBody, or the stack's own with UsePreviousTemplate; TemplateURL would need S3."""
    body = text(params, "TemplateBody")
    if body:
        return body
    if flag(params, "UsePreviousTemplate"):
        if previous is None or not previous.template_body:
            raise ValidationError("UsePreviousTemplate is only allowed for a stack that has one")
        return previous.template_body
    if text(params, "TemplateURL"):
        raise ValidationError(
            "TemplateURL is not supported by KQS (it serves no S3): send the template as "
            "TemplateBody (51,200 bytes at most)"
        )
    raise ValidationError("Either Template URL or Template Body must be specified.")


def stack_named(store: StackStore, region: str, account_id: str, name: str) -> Stack:
    stack = store.find(region, account_id, name)
    if stack is None:
        raise ValidationError(f"Stack with id {name} does not exist")
    return stack
