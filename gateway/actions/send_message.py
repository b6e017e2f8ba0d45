"""SendMessage: validated body and attributes, answered after Kafka acknowledged the record."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common import limits
from gateway.common.checksums import md5_of_attributes
from gateway.common.errors import InvalidParameterValue
from gateway.common.ids import new_uuid
from gateway.sqs.fifo import check_fifo_send, check_standard_send
from gateway.sqs.message_attributes import message_size, parse_attributes, validate_body
from gateway.sqs.queues import attribute_int, is_fifo
from lease_store.records import AttributeValue, StoredMessage
from lease_store.value_class import value_class
from topology.catalog import QueueRecord


@value_class
class SendMessageRequest:
    queue_url: str
    message_body: str
    delay_seconds: int | None
    message_attributes: dict[str, AttributeValue]
    message_system_attributes: dict[str, AttributeValue]
    message_group_id: str | None
    message_deduplication_id: str | None
    size: int  # SQS's SentMessageSize: the body and the attributes (`message_size`)


# The optional members of a send. Most sends name none of them: their getters are then
# skipped, and a 1 KB message decodes in ~2.0 µs instead of ~3.8 (bench/results/archive/
# profile-journal.md, 2026-11-28 (46fd105)).
_OPTIONAL_MEMBERS = frozenset(
    {
        "MessageAttributes",
        "MessageSystemAttributes",
        "DelaySeconds",
        "MessageGroupId",
        "MessageDeduplicationId",
    }
)


def decode_entry(p: Params, queue_url: str) -> SendMessageRequest:
    """Decode one message; shared by SendMessage and each SendMessageBatch entry."""
    body = p.required_str("MessageBody")  # missing or empty: MissingParameter, as in SQS
    validate_body(body)
    if p.names_none_of(_OPTIONAL_MEMBERS):
        return SendMessageRequest(
            queue_url=queue_url,
            message_body=body,
            delay_seconds=None,
            message_attributes={},
            message_system_attributes={},
            message_group_id=None,
            message_deduplication_id=None,
            size=message_size(body, {}),
        )
    system = parse_attributes(p.map_of_maps("MessageSystemAttributes"))
    for name, value in system.items():
        if name != "AWSTraceHeader" or value.data_type != "String":
            raise InvalidParameterValue(f"Message system attribute name '{name}' is invalid.")
    attributes = parse_attributes(p.map_of_maps("MessageAttributes"))
    return SendMessageRequest(
        queue_url=queue_url,
        message_body=body,
        delay_seconds=p.int_in_range("DelaySeconds", 0, limits.MAX_DELAY_S),
        message_attributes=attributes,
        message_system_attributes=system,
        message_group_id=p.optional_str("MessageGroupId"),
        message_deduplication_id=p.optional_str("MessageDeduplicationId"),
        size=message_size(body, attributes),
    )


def decode(p: Params) -> SendMessageRequest:
    return decode_entry(p, p.required_str("QueueUrl"))


@value_class
class QueueSendSettings:
    """What a send takes from its queue's attributes: read once per request, not per message."""

    max_bytes: int  # MaximumMessageSize
    delay_s: int  # DelaySeconds, for a message that names none
    fifo: bool


def send_settings(record: QueueRecord) -> QueueSendSettings:
    return QueueSendSettings(
        max_bytes=attribute_int(record, "MaximumMessageSize"),
        delay_s=attribute_int(record, "DelaySeconds"),
        fifo=is_fifo(record),
    )


def build_message(
    req: SendMessageRequest,
    record: QueueRecord,
    ctx: RequestContext,
    settings: QueueSendSettings | None = None,
    sent_ms: int | None = None,
) -> StoredMessage:
    """The message to append, with the queue's defaults applied and its size limit checked.

    `settings` are the queue's (`send_settings`) and `sent_ms` the clock's time, each read
    once for the entries of a batch."""
    if settings is None:
        settings = send_settings(record)
    if req.size > settings.max_bytes:
        raise InvalidParameterValue(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{settings.max_bytes} bytes."
        )
    body = req.message_body.encode()
    deduplication_id = deduplication_scope = None
    delay_s = req.delay_seconds
    if settings.fifo:
        group, deduplication_id, deduplication_scope = check_fifo_send(
            record, body, req.message_group_id, req.message_deduplication_id, delay_s
        )
        delay_s = None  # the queue's delay applies
    elif req.message_group_id is not None or req.message_deduplication_id is not None:
        check_standard_send(req.message_group_id, req.message_deduplication_id)
    if delay_s is None:
        delay_s = settings.delay_s
    trace = req.message_system_attributes.get("AWSTraceHeader")
    return StoredMessage(
        message_id=new_uuid(),
        body=body,
        sent_ms=ctx.runtime.clock.now_ms() if sent_ms is None else sent_ms,
        delay_s=delay_s,
        attributes=req.message_attributes,
        sender_id=ctx.sender_id,
        aws_trace_header=trace.string_value if trace else ctx.trace_header,
        message_group_id=req.message_group_id,
        deduplication_id=deduplication_id,
        deduplication_scope=deduplication_scope,
        body_md5=hashlib.md5(body).digest(),  # for the answer, and kept for every receive
    )


def sent_result(message: StoredMessage, req: SendMessageRequest) -> Result:
    result: Result = {
        "MessageId": message.message_id,
        "MD5OfMessageBody": message.md5_of_body(),
    }
    if message.attributes:  # (most sends have none: no call then)
        result["MD5OfMessageAttributes"] = md5_of_attributes(message.attributes)
    if req.message_system_attributes:
        result["MD5OfMessageSystemAttributes"] = md5_of_attributes(req.message_system_attributes)
    return result


async def handle(req: SendMessageRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    message = build_message(req, record, ctx)
    if message.deduplication_scope is not None:
        sent = await ctx.runtime.fifo.send(record, message)
        if not sent.duplicate:
            ctx.runtime.events.sent(record, [(message, req.size)])
        result = sent_result(replace(message, message_id=sent.message_id), req)
        return {**result, "SequenceNumber": sent.sequence_number}
    await ctx.runtime.messages.send(record, message)
    ctx.runtime.events.sent(record, [(message, req.size)])
    return sent_result(message, req)


ACTION = Action("SendMessage", decode, handle)
