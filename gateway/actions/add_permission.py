"""AddPermission: a labelled Allow statement for other accounts, kept in the queue's Policy."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import QueueDoesNotExist
from gateway.iam.permissions import add_permission


@dataclass(frozen=True)
class AddPermissionRequest:
    queue_url: str
    label: str
    aws_account_ids: list[str]
    actions: list[str]


def decode(p: Params) -> AddPermissionRequest:
    return AddPermissionRequest(
        queue_url=p.required_str("QueueUrl"),
        label=p.required_str("Label"),
        aws_account_ids=p.str_list("AWSAccountIds"),
        actions=p.str_list("Actions"),
    )


async def handle(req: AddPermissionRequest, ctx: RequestContext) -> Result:
    registry = ctx.runtime.registry
    record = ctx.queue(req.queue_url)
    policy = add_permission(
        record.attributes.get("Policy"),
        ctx.queue_arn(record),
        req.label,
        req.aws_account_ids,
        req.actions,
    )
    current = registry.current(record)
    if current is None:
        raise QueueDoesNotExist()
    await registry.update(
        current.changed(
            attributes={**current.attributes, "Policy": policy},
            modified_s=ctx.runtime.clock.now_ms() // 1000,
        )
    )
    return {}


ACTION = Action("AddPermission", decode, handle)
