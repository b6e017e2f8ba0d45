"""The `Scope` of one stack: its pseudo parameters, its parameter values, its resources as
they stand (or, while planning, placeholders for those not made yet) and the exports of the
account's other stacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.cloudformation import parameters
from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.intrinsics import Scope
from gateway.cloudformation.records import Stack
from gateway.cloudformation.resources.types import ATTRIBUTES
from gateway.cloudformation.store import StackStore
from gateway.cloudformation.template import Template


def pseudo_parameters(stack: Stack) -> dict[str, Any]:
    return {
        "AWS::AccountId": stack.account_id,
        "AWS::Region": stack.region,
        "AWS::StackName": stack.name,
        "AWS::StackId": stack.stack_id,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::NotificationARNs": list(stack.notification_arns),
    }


def placeholder(logical_id: str, attribute: str = "") -> str:
    """What a resource not made yet stands for while a change is planned."""
    return f"{{{{pending:{logical_id}{'.' + attribute if attribute else ''}}}}}"


def stack_scope(
    stack: Stack,
    template: Template,
    values: dict[str, str],
    store: StackStore,
    imported: list[str],
    pending: Callable[[str], bool] = lambda _: False,
) -> Scope:
    """A scope over `stack`'s resources as they are now; a resource for which `pending` says
    True (planning) resolves to a placeholder. Each export read is appended to `imported`."""

    def resource_ref(logical_id: str) -> Any:
        state = stack.resources.get(logical_id)
        if pending(logical_id):
            return placeholder(logical_id)
        if state is None or not state.physical_id:
            raise ValidationError(f"Template error: resource {logical_id} is not created yet")
        return state.physical_id

    def resource_attribute(logical_id: str, attribute: str) -> Any:
        kind = str(template.resources[logical_id].get("Type"))
        known = attribute in ATTRIBUTES.get(kind, ())
        if pending(logical_id) and known:
            return placeholder(logical_id, attribute)
        state = stack.resources.get(logical_id)
        if not known or state is None or attribute not in state.attributes:
            raise ValidationError(
                f"Template error: resource {logical_id} does not support attribute type "
                f"{attribute} in Fn::GetAtt"
            )
        return state.attributes[attribute]

    def import_value(name: str) -> str:
        exports = store.exports(stack.region, stack.account_id)
        if name not in exports or exports[name][0] == stack.stack_id:
            raise ValidationError(f"No export named {name} found.")
        if name not in imported:
            imported.append(name)
        return exports[name][1]

    return Scope(
        template,
        parameters.typed(template, values),
        pseudo_parameters(stack),
        resource_ref,
        resource_attribute,
        import_value,
    )
