"""GetQueueUrl in the request's region, optionally of another account (QueueOwnerAWSAccountId)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import QueueDoesNotExist


@dataclass(frozen=True)
class GetQueueUrlRequest:
    queue_name: str
    queue_owner_aws_account_id: str | None


def decode(p: Params) -> GetQueueUrlRequest:
    return GetQueueUrlRequest(
        queue_name=p.required_str("QueueName"),
        queue_owner_aws_account_id=p.optional_str("QueueOwnerAWSAccountId"),
    )


async def handle(req: GetQueueUrlRequest, ctx: RequestContext) -> Result:
    account_id = req.queue_owner_aws_account_id or ctx.account_id
    record = ctx.runtime.registry.active(ctx.region, account_id, req.queue_name)
    if record is None:
        raise QueueDoesNotExist()
    return {"QueueUrl": ctx.queue_url(record)}


ACTION = Action("GetQueueUrl", decode, handle)
