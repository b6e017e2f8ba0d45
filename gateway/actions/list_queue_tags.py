"""ListQueueTags: the queue's cost-allocation tags."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params


@dataclass(frozen=True)
class ListQueueTagsRequest:
    queue_url: str


def decode(p: Params) -> ListQueueTagsRequest:
    return ListQueueTagsRequest(queue_url=p.required_str("QueueUrl"))


async def handle(req: ListQueueTagsRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    return {"Tags": dict(record.tags)} if record.tags else {}


ACTION = Action("ListQueueTags", decode, handle)
