"""DeleteQueue: removes the topic and lease state; parked long polls are answered."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params


@dataclass(frozen=True)
class DeleteQueueRequest:
    queue_url: str


def decode(p: Params) -> DeleteQueueRequest:
    return DeleteQueueRequest(queue_url=p.required_str("QueueUrl"))


async def handle(req: DeleteQueueRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    await ctx.runtime.registry.delete(record, ctx.runtime.clock.now_ms())
    return {}


ACTION = Action("DeleteQueue", decode, handle)
