"""CreateQueue: idempotent for identical attributes, QueueAlreadyExists otherwise."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.sqs.queue_attributes import FIFO_DEFAULTS, validate_fifo_settings, validate_settable
from gateway.sqs.tags import validate_tags

# How long CreateQueue waits for the ingest group to give the new partitions an owner.
NEW_QUEUE_OWNED_WITHIN_S = 10.0


@dataclass(frozen=True)
class CreateQueueRequest:
    queue_name: str
    attributes: dict[str, str]
    tags: dict[str, str]


def decode(p: Params) -> CreateQueueRequest:
    return CreateQueueRequest(
        queue_name=p.required_str("QueueName"),
        attributes=p.str_map("Attributes"),
        # The API model names this member `tags` (lower-case) in JSON; Query sends `Tag.N.*`,
        # which `query.py` turns into `Tags`.
        tags=p.str_map("tags") or p.str_map("Tags"),
    )


async def handle(req: CreateQueueRequest, ctx: RequestContext) -> Result:
    fifo = req.attributes.get("FifoQueue", "").lower() == "true"
    attributes = validate_settable(req.attributes, fifo=fifo)
    ctx.runtime.messages.encryption.check_settable(attributes)
    if fifo:
        validate_fifo_settings({**FIFO_DEFAULTS, **attributes})
    source_arn = f"arn:aws:sqs:{ctx.region}:{ctx.account_id}:{req.queue_name}"
    ctx.runtime.registry.validate_redrive(attributes, source_arn)
    validate_tags(req.tags, queue_name=req.queue_name)
    record, created = await ctx.runtime.registry.create(
        ctx.region, ctx.account_id, req.queue_name, attributes, req.tags, ctx.runtime.clock.now_ms()
    )
    if created:
        # Several gateways: a gateway serves each new partition before the answer, so a send
        # right after it is applied by an owner at once (a no-op with one gateway).
        await ctx.runtime.messages.ownership.until_owned(record, NEW_QUEUE_OWNED_WITHIN_S)
    return {"QueueUrl": ctx.queue_url(record)}


ACTION = Action("CreateQueue", decode, handle)
