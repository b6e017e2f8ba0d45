"""ChangeMessageVisibilityBatch: up to ten ChangeMessageVisibility entries, failing one by one."""

from __future__ import annotations

from gateway.action import Action, Result
from gateway.actions import change_message_visibility
from gateway.actions.change_message_visibility import ChangeMessageVisibilityRequest
from gateway.batch import BatchRequest, decode_batch, run_batch
from gateway.context import RequestContext
from gateway.params import Params


def decode(p: Params) -> BatchRequest[ChangeMessageVisibilityRequest]:
    return decode_batch(
        p, "ChangeMessageVisibilityBatchRequestEntry", change_message_visibility.decode_entry
    )


async def handle(req: BatchRequest[ChangeMessageVisibilityRequest], ctx: RequestContext) -> Result:
    return await run_batch(req, ctx, change_message_visibility.handle)


ACTION = Action("ChangeMessageVisibilityBatch", decode, handle)
