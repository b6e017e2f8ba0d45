"""DeleteMessage: any receipt handle of the message deletes it; deleting twice succeeds."""

from __future__ import annotations

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from lease_store.value_class import value_class


@value_class
class DeleteMessageRequest:
    queue_url: str
    receipt_handle: str


def decode_entry(p: Params, queue_url: str) -> DeleteMessageRequest:
    return DeleteMessageRequest(queue_url=queue_url, receipt_handle=p.required_str("ReceiptHandle"))


def decode(p: Params) -> DeleteMessageRequest:
    return decode_entry(p, p.required_str("QueueUrl"))


async def handle(req: DeleteMessageRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    await ctx.runtime.messages.delete(record, req.receipt_handle)
    return {}


ACTION = Action("DeleteMessage", decode, handle)
