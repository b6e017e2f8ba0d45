"""PurgeQueue: delete every message the queue holds now; once per queue every 60 s."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params


@dataclass(frozen=True)
class PurgeQueueRequest:
    queue_url: str


def decode(p: Params) -> PurgeQueueRequest:
    return PurgeQueueRequest(queue_url=p.required_str("QueueUrl"))


async def handle(req: PurgeQueueRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    await ctx.runtime.messages.purge(record)
    return {}


ACTION = Action("PurgeQueue", decode, handle)
