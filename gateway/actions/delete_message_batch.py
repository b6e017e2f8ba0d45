"""DeleteMessageBatch: up to ten DeleteMessage entries; a bad handle fails only its entry.

The entries are deleted together (`MessageService.delete_many`): one lease-store write and one
fsync for the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.actions import delete_message
from gateway.actions.action import Action, Result
from gateway.actions.batch import BatchRequest, decode_batch, run_batch_together
from gateway.actions.context import RequestContext
from gateway.actions.delete_message import DeleteMessageRequest
from gateway.actions.params import Params


def decode(p: Params) -> BatchRequest[DeleteMessageRequest]:
    return decode_batch(p, "DeleteMessageBatchRequestEntry", delete_message.decode_entry)


async def handle(req: BatchRequest[DeleteMessageRequest], ctx: RequestContext) -> Result:
    return await run_batch_together(req, ctx, _delete_all, "DeleteMessageBatch")


async def _delete_all(
    entries: list[DeleteMessageRequest], ctx: RequestContext
) -> Sequence[Result | Exception]:
    record = ctx.queue(entries[0].queue_url)  # the batch's queue, for every entry
    errors = await ctx.runtime.messages.delete_many(
        record, [entry.receipt_handle for entry in entries]
    )
    return [{} if error is None else error for error in errors]


ACTION = Action("DeleteMessageBatch", decode, handle)
