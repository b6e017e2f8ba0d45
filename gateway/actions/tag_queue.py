"""TagQueue: add or overwrite tags, 50 per queue at most."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import MissingParameter
from gateway.sqs.tags import validate_tags


@dataclass(frozen=True)
class TagQueueRequest:
    queue_url: str
    tags: dict[str, str]


def decode(p: Params) -> TagQueueRequest:
    tags = p.str_map("Tags")
    queue_url = p.required_str("QueueUrl")
    if not tags:
        raise MissingParameter.named("Tags")
    return TagQueueRequest(queue_url=queue_url, tags=tags)


async def handle(req: TagQueueRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    validate_tags(req.tags, existing=record.tags, queue_name=record.name)
    await ctx.runtime.registry.update(record.changed(tags={**record.tags, **req.tags}))
    return {}


ACTION = Action("TagQueue", decode, handle)
