"""ReceiveMessage: short or long poll; attributes returned only when asked for."""

from __future__ import annotations

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common import limits
from gateway.common.checksums import md5_of_attributes
from gateway.common.results import Received
from gateway.sqs.encryption import QueueEncryption
from gateway.sqs.fifo import check_attempt_id
from gateway.sqs.message_attributes import SYSTEM_ATTRIBUTE_NAMES, select_message_attributes
from gateway.sqs.queues import attribute_int, is_fifo
from lease_store.fifo import sequence_number
from lease_store.value_class import value_class
from topology.record_format import ReplayOrigin


@value_class
class ReceiveMessageRequest:
    queue_url: str
    max_number_of_messages: int
    visibility_timeout: int | None
    wait_time_seconds: int | None
    system_attribute_names: list[str]
    message_attribute_names: list[str]
    receive_request_attempt_id: str | None = None


def decode(p: Params) -> ReceiveMessageRequest:
    return ReceiveMessageRequest(
        queue_url=p.required_str("QueueUrl"),
        max_number_of_messages=p.int_in_range("MaxNumberOfMessages", 1, limits.MAX_RECEIVE_MESSAGES)
        or 1,
        visibility_timeout=p.int_in_range("VisibilityTimeout", 0, limits.MAX_VISIBILITY_TIMEOUT_S),
        wait_time_seconds=p.int_in_range(
            "WaitTimeSeconds",
            0,
            limits.MAX_WAIT_TIME_S,
            f"Must be >= 0 and <= {limits.MAX_WAIT_TIME_S}, if provided.",
        ),
        # The older AttributeNames and the newer MessageSystemAttributeNames name the same set.
        system_attribute_names=p.str_list("AttributeNames")
        + p.str_list("MessageSystemAttributeNames"),
        message_attribute_names=p.str_list("MessageAttributeNames"),
        receive_request_attempt_id=p.optional_str("ReceiveRequestAttemptId"),
    )


def _system_attributes(received: Received, names: list[str], fifo_queue: bool) -> dict[str, str]:
    wanted = set(SYSTEM_ATTRIBUTE_NAMES) if "All" in names else set(names)
    message, fact = received.delivery.message, received.delivery.fact
    origin = ReplayOrigin.decode(message.replay_of)
    values = {
        "SenderId": message.sender_id,
        "SentTimestamp": str(message.sent_ms),
        "ApproximateReceiveCount": str(fact.receive_count),
        "ApproximateFirstReceiveTimestamp": str(fact.first_receive_ms),
        "AWSTraceHeader": message.aws_trace_header,
        "DeadLetterQueueSourceArn": message.dead_letter_source_arn,
        "MessageGroupId": message.message_group_id,
        "MessageDeduplicationId": message.deduplication_id,
        "SequenceNumber": sequence_number(received.delivery.offset) if fifo_queue else None,
        "KqsReplayOfMessageId": origin.message_id if origin else None,
        "KqsReplayOfSentTimestamp": str(origin.sent_ms) if origin else None,
    }
    return {k: v for k, v in values.items() if k in wanted and v is not None}


def _message_result(
    received: Received, req: ReceiveMessageRequest, fifo_queue: bool, encryption: QueueEncryption
) -> Result:
    message = received.delivery.message
    if message.sealed:
        message = encryption.open(message)  # the lease store keeps an encrypted queue's sealed
    out: Result = {
        "MessageId": message.message_id,
        "ReceiptHandle": received.receipt_handle,
        "MD5OfBody": message.md5_of_body(),
        "Body": message.body.decode("utf-8", errors="replace"),
    }
    # Most receives ask for neither kind of attribute: then no call is made for them.
    names = req.system_attribute_names
    if names and (attributes := _system_attributes(received, names, fifo_queue)):
        out["Attributes"] = attributes
    if req.message_attribute_names and message.attributes:
        selected = select_message_attributes(message.attributes, req.message_attribute_names)
        if selected:
            out["MD5OfMessageAttributes"] = md5_of_attributes(selected)
            out["MessageAttributes"] = {name: value.to_json() for name, value in selected.items()}
    return out


async def handle(req: ReceiveMessageRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    visibility_s = req.visibility_timeout
    if visibility_s is None:
        visibility_s = attribute_int(record, "VisibilityTimeout")
    wait_s = req.wait_time_seconds
    if wait_s is None:
        wait_s = attribute_int(record, "ReceiveMessageWaitTimeSeconds")
    ctx.notes.long_poll = wait_s > 0
    fifo_queue = is_fifo(record)
    attempt_id = req.receive_request_attempt_id if fifo_queue else None  # FIFO only, as in SQS
    check_attempt_id(attempt_id)
    messages = ctx.runtime.messages
    if attempt_id is not None:
        received = await ctx.runtime.fifo.receive(
            record, attempt_id, req.max_number_of_messages, visibility_s, wait_s
        )
    else:
        received = await messages.receive(record, req.max_number_of_messages, visibility_s, wait_s)
    if not received:
        return {}
    encryption = messages.encryption
    await encryption.ready_to_open(r.delivery.message for r in received)
    return {"Messages": [_message_result(r, req, fifo_queue, encryption) for r in received]}


ACTION = Action("ReceiveMessage", decode, handle)
