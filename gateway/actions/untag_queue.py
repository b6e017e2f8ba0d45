"""UntagQueue: remove tags by key; keys the queue does not have are ignored."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common import limits
from gateway.common.errors import InvalidParameterValue


@dataclass(frozen=True)
class UntagQueueRequest:
    queue_url: str
    tag_keys: list[str]


def decode(p: Params) -> UntagQueueRequest:
    tag_keys = p.str_list("TagKeys")
    queue_url = p.required_str("QueueUrl")
    if not tag_keys or any(not 1 <= len(k) <= limits.MAX_TAG_KEY_LENGTH for k in tag_keys):
        raise InvalidParameterValue(
            f"Tag keys must be between 1 and {limits.MAX_TAG_KEY_LENGTH} characters in length."
        )
    return UntagQueueRequest(queue_url=queue_url, tag_keys=tag_keys)


async def handle(req: UntagQueueRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    remaining = {k: v for k, v in record.tags.items() if k not in req.tag_keys}
    if remaining != record.tags:
        await ctx.runtime.registry.update(record.changed(tags=remaining))
    return {}


ACTION = Action("UntagQueue", decode, handle)
