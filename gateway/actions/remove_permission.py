"""RemovePermission: drop the statement an AddPermission label names from the queue's Policy."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import QueueDoesNotExist
from gateway.iam.permissions import remove_permission


@dataclass(frozen=True)
class RemovePermissionRequest:
    queue_url: str
    label: str


def decode(p: Params) -> RemovePermissionRequest:
    return RemovePermissionRequest(
        queue_url=p.required_str("QueueUrl"), label=p.required_str("Label")
    )


async def handle(req: RemovePermissionRequest, ctx: RequestContext) -> Result:
    registry = ctx.runtime.registry
    record = ctx.queue(req.queue_url)
    policy = remove_permission(record.attributes.get("Policy"), req.label)
    current = registry.current(record)
    if current is None:
        raise QueueDoesNotExist()
    attributes = {k: v for k, v in current.attributes.items() if k != "Policy"}
    if policy:
        attributes["Policy"] = policy
    await registry.update(
        current.changed(attributes=attributes, modified_s=ctx.runtime.clock.now_ms() // 1000)
    )
    return {}


ACTION = Action("RemovePermission", decode, handle)
