"""SendMessageBatch: up to ten SendMessage entries, each answered once acked.

On a standard queue the entries are produced together (`MessageService.send_many`): one
produce request, one lease-store write when their reports arrive, no task per entry. A FIFO
queue's entries go one by one through the FIFO send (deduplication, group order), once every
entry was found to name its group and, unless the queue has content-based deduplication, a
deduplication id: one that does not fails the whole call, as in SQS.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.actions import send_message
from gateway.actions.action import Action, Result
from gateway.actions.batch import BatchRequest, decode_batch, run_batch, run_batch_together
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.actions.send_message import SendMessageRequest
from gateway.common import limits
from gateway.common.errors import BatchRequestTooLong
from gateway.sqs.fifo import check_fifo_batch
from gateway.sqs.queues import is_fifo
from lease_store.records import StoredMessage


def _failed_entry_bytes(raw: Params) -> int:
    # An entry that failed to decode still travelled in the request: count its body.
    body = raw.raw("MessageBody")
    return len(body.encode()) if isinstance(body, str) else 0


def _total_bytes(batch: BatchRequest[SendMessageRequest], p: Params) -> int:
    """The size of the batch's messages; the raw entries are read again only for an entry
    that failed to decode (nearly never)."""
    total = 0
    raw_entries: list[Params] | None = None
    for at, entry in enumerate(batch.entries):
        if entry.request is not None:
            total += entry.request.size
            continue
        if raw_entries is None:
            raw_entries = p.entries()
        total += _failed_entry_bytes(raw_entries[at])
    return total


def decode(p: Params) -> BatchRequest[SendMessageRequest]:
    batch = decode_batch(p, "SendMessageBatchRequestEntry", send_message.decode_entry)
    total = _total_bytes(batch, p)
    if total > limits.MAX_MESSAGE_BYTES:
        raise BatchRequestTooLong(
            f"Batch requests cannot be longer than {limits.MAX_MESSAGE_BYTES} bytes. "
            f"You have sent {total} bytes."
        )
    return batch


async def handle(req: BatchRequest[SendMessageRequest], ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    if is_fifo(record):
        check_fifo_batch(
            record,
            [
                (e.request.message_group_id, e.request.message_deduplication_id)
                for e in req.entries
                if e.request is not None
            ],
        )
        return await run_batch(req, ctx, send_message.handle, "SendMessageBatch")
    return await run_batch_together(req, ctx, _send_all, "SendMessageBatch")


async def _send_all(
    entries: list[SendMessageRequest], ctx: RequestContext
) -> Sequence[Result | Exception]:
    record = ctx.queue(entries[0].queue_url)  # the batch's queue, for every entry
    settings = send_message.send_settings(record)
    sent_ms = ctx.runtime.clock.now_ms()  # the batch's messages are sent together
    answers: list[Result | Exception] = []
    built: list[tuple[int, StoredMessage]] = []
    for req in entries:
        try:
            message = send_message.build_message(req, record, ctx, settings, sent_ms)
            built.append((len(answers), message))
            answers.append({})  # replaced below
        except Exception as error:  # noqa: BLE001 - fails this entry only (or, a bug, the batch)
            answers.append(error)
    outcomes = await ctx.runtime.messages.send_many(record, [message for _, message in built])
    stored: list[tuple[StoredMessage, int]] = []  # one event for the request's messages
    for (at, message), outcome in zip(built, outcomes, strict=True):
        if isinstance(outcome, Exception):
            answers[at] = outcome
            continue
        stored.append((message, entries[at].size))
        answers[at] = send_message.sent_result(message, entries[at])
    ctx.runtime.events.sent(record, stored)
    return answers


ACTION = Action("SendMessageBatch", decode, handle)
