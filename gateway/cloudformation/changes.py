"""What an update or change set would do to each resource (Add / Modify / Remove, and whether
a Modify replaces it), worked out without touching anything.

A resource whose properties refer to one that is added or replaced sees a placeholder
(`scope.placeholder`) where the new value will be, so it shows as modified, as AWS shows it.
"""

from __future__ import annotations

from typing import Any

from gateway.cloudformation.intrinsics import Scope
from gateway.cloudformation.records import Stack
from gateway.cloudformation.resources.types import HANDLERS
from gateway.cloudformation.scope import stack_scope
from gateway.cloudformation.store import StackStore
from gateway.cloudformation.template import Template, order


def included_order(template: Template, scope: Scope) -> list[str]:
    """The resources whose Condition holds, in dependency order."""
    included = [lid for lid, r in template.resources.items() if scope.included(r)]
    return order(template, included)


def plan(
    stack: Stack, template: Template, values: dict[str, str], store: StackStore
) -> list[dict[str, Any]]:
    """The changes (DescribeChangeSet's `Changes`) that `template` with `values` makes to
    `stack`; raises `ValidationError` for what the template cannot resolve."""
    pending: set[str] = set()
    scope = stack_scope(stack, template, values, store, [], pending=lambda lid: lid in pending)
    changes: list[dict[str, Any]] = []
    included = included_order(template, scope)
    for logical_id in included:
        declaration = template.resources[logical_id]
        kind = str(declaration["Type"])
        old = stack.resources.get(logical_id)
        if old is None or not old.physical_id or old.status.startswith("DELETE_"):
            pending.add(logical_id)
            changes.append(_change("Add", logical_id, kind))
            continue
        props = scope.resolve(declaration.get("Properties", {}))
        if kind != old.type:
            pending.add(logical_id)
            changes.append(_change("Modify", logical_id, kind, old.physical_id, "True"))
            continue
        if props == old.properties:
            continue
        handler = HANDLERS[kind]
        names = sorted(
            n for n in {*props, *old.properties} if props.get(n) != old.properties.get(n)
        )
        replaced = [n for n in names if n in handler.replaced_by]
        replacement = "False"
        if replaced:
            pending.add(logical_id)
            unknown = any("{{pending:" in str(props.get(n)) for n in replaced)
            replacement = "Conditional" if unknown else "True"
        details = [
            {
                "Target": {
                    "Attribute": "Properties",
                    "Name": name,
                    "RequiresRecreation": "Always" if name in handler.replaced_by else "Never",
                },
                "Evaluation": "Static",
                "ChangeSource": "DirectModification",
            }
            for name in names
        ]
        changes.append(_change("Modify", logical_id, kind, old.physical_id, replacement, details))
    for logical_id, old in stack.resources.items():
        if logical_id not in included and old.physical_id and not old.status.startswith("DELETE_"):
            changes.append(_change("Remove", logical_id, old.type, old.physical_id))
    return changes


def _change(
    action: str,
    logical_id: str,
    kind: str,
    physical_id: str = "",
    replacement: str = "",
    details: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    change: dict[str, Any] = {
        "Action": action,
        "LogicalResourceId": logical_id,
        "ResourceType": kind,
    }
    if physical_id:
        change["PhysicalResourceId"] = physical_id
    if action == "Modify":
        change["Replacement"] = replacement
        change["Scope"] = ["Properties"] if details else []
        change["Details"] = details or []
    return {"Type": "Resource", "ResourceChange": change}
