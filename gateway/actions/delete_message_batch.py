"""DeleteMessageBatch: up to ten DeleteMessage entries; a bad handle fails only its entry."""

from __future__ import annotations

from gateway.action import Action, Result
from gateway.actions import delete_message
from gateway.actions.delete_message import DeleteMessageRequest
from gateway.batch import BatchRequest, decode_batch, run_batch
from gateway.context import RequestContext
from gateway.params import Params


def decode(p: Params) -> BatchRequest[DeleteMessageRequest]:
    return decode_batch(p, "DeleteMessageBatchRequestEntry", delete_message.decode_entry)


async def handle(req: BatchRequest[DeleteMessageRequest], ctx: RequestContext) -> Result:
    return await run_batch(req, ctx, delete_message.handle)


ACTION = Action("DeleteMessageBatch", decode, handle)
