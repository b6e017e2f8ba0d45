"""SendMessageBatch: up to ten SendMessage entries, sent concurrently, each answered once acked."""

from __future__ import annotations

from gateway import limits
from gateway.action import Action, Result
from gateway.actions import send_message
from gateway.actions.send_message import SendMessageRequest
from gateway.batch import BatchEntry, BatchRequest, decode_batch, run_batch
from gateway.context import RequestContext
from gateway.errors import BatchRequestTooLong
from gateway.message_attributes import message_size
from gateway.params import Params


def _entry_bytes(entry: BatchEntry[SendMessageRequest], raw: Params) -> int:
    if entry.request is not None:
        return message_size(entry.request.message_body, entry.request.message_attributes)
    # An entry that failed to decode still travelled in the request: count its body.
    body = raw.raw("MessageBody")
    return len(body.encode()) if isinstance(body, str) else 0


def decode(p: Params) -> BatchRequest[SendMessageRequest]:
    batch = decode_batch(p, "SendMessageBatchRequestEntry", send_message.decode_entry)
    total = sum(
        _entry_bytes(entry, raw) for entry, raw in zip(batch.entries, p.entries(), strict=True)
    )
    if total > limits.MAX_MESSAGE_BYTES:
        raise BatchRequestTooLong(
            f"Batch requests cannot be longer than {limits.MAX_MESSAGE_BYTES} bytes. "
            f"You have sent {total} bytes."
        )
    return batch


async def handle(req: BatchRequest[SendMessageRequest], ctx: RequestContext) -> Result:
    return await run_batch(req, ctx, send_message.handle)


ACTION = Action("SendMessageBatch", decode, handle)
