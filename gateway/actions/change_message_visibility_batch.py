"""ChangeMessageVisibilityBatch: up to ten ChangeMessageVisibility entries, failing one by one.

The entries are changed together (`MessageService.change_visibility_many`): one fsync wait for
the batch, no task per entry.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.actions import change_message_visibility
from gateway.actions.action import Action, Result
from gateway.actions.batch import BatchRequest, decode_batch, run_batch_together
from gateway.actions.change_message_visibility import ChangeMessageVisibilityRequest
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from lease_store.errors import MessageNotAvailable


def decode(p: Params) -> BatchRequest[ChangeMessageVisibilityRequest]:
    return decode_batch(
        p, "ChangeMessageVisibilityBatchRequestEntry", change_message_visibility.decode_entry
    )


async def handle(req: BatchRequest[ChangeMessageVisibilityRequest], ctx: RequestContext) -> Result:
    return await run_batch_together(req, ctx, _change_all, "ChangeMessageVisibilityBatch")


async def _change_all(
    entries: list[ChangeMessageVisibilityRequest], ctx: RequestContext
) -> Sequence[Result | Exception]:
    record = ctx.queue(entries[0].queue_url)  # the batch's queue, for every entry
    errors = await ctx.runtime.messages.change_visibility_many(
        record, [(entry.receipt_handle, entry.visibility_timeout) for entry in entries]
    )
    return [
        {}
        if error is None
        else change_message_visibility.not_available(entry.receipt_handle)
        if isinstance(error, MessageNotAvailable)
        else error
        for entry, error in zip(entries, errors, strict=True)
    ]


ACTION = Action("ChangeMessageVisibilityBatch", decode, handle)
