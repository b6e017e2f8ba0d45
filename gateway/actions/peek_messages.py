"""PeekMessages (KQS's own): browse a queue's messages without receiving them.

Each message as ReceiveMessage shapes it (MessageId, MD5OfBody, Body, Attributes,
MessageAttributes and their MD5), with no ReceiptHandle, the body cut to
`BodyPreviewLength` characters, and KQS's attributes saying where and how it is: KqsStatus
(VISIBLE, IN_FLIGHT, DELAYED, DELETED, UNKNOWN), KqsVisibleAtTimestamp (in flight or delayed
until), KqsPartition and KqsOffset, KqsBodyLength, and the replay origin of a replayed
message. The answer also says how far back a replay of the queue can reach
(OldestAvailableTimestamp), the queue's MessageRetentionPeriod and its topic's retention.ms
(TopicRetentionMs: the period plus `limits.RETENTION_MARGIN_MS`). Nothing changes by
looking: see `gateway/sqs/replay/browse.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.checksums import md5_of_attributes
from gateway.common.errors import InvalidParameterValue
from gateway.sqs.encryption import QueueEncryption
from gateway.sqs.replay.browse import Browsed, Status
from topology.record_format import ReplayOrigin

MAX_MESSAGES = 100
DEFAULT_PREVIEW = 256


@dataclass(frozen=True)
class PeekMessagesRequest:
    queue_url: str
    max_number_of_messages: int
    newest_first: bool
    statuses: frozenset[Status]
    body_preview_length: int
    next_token: str | None


def _statuses(p: Params) -> frozenset[Status]:
    names = [*p.str_list("Statuses")]
    single = p.optional_str("Status")
    if single:
        names.extend(single.split(","))
    try:
        return frozenset(Status(name.strip().upper().replace("-", "_")) for name in names)
    except ValueError:
        raise InvalidParameterValue(
            "Value for parameter Status is invalid. Reason: one or more of "
            + ", ".join(s.value for s in Status)
            + "."
        ) from None


def decode(p: Params) -> PeekMessagesRequest:
    order = (p.optional_str("Order") or "oldest").lower()
    if order not in ("oldest", "newest"):
        raise InvalidParameterValue(
            "Value for parameter Order is invalid. Reason: oldest or newest."
        )
    return PeekMessagesRequest(
        queue_url=p.required_str("QueueUrl"),
        max_number_of_messages=p.int_in_range("MaxNumberOfMessages", 1, MAX_MESSAGES) or 10,
        newest_first=order == "newest",
        statuses=_statuses(p),
        body_preview_length=p.int_in_range("BodyPreviewLength", 0, 262_144) or DEFAULT_PREVIEW,
        next_token=p.optional_str("NextToken") or None,
    )


def message_entry(browsed: Browsed, preview: int, encryption: QueueEncryption) -> Result:
    logged = browsed.logged
    message = encryption.open(logged.message)  # an encrypted queue's records are sealed
    body = message.body.decode("utf-8", errors="replace")
    attributes = {
        "KqsStatus": browsed.status.value,
        "KqsPartition": str(logged.partition),
        "KqsOffset": str(logged.offset),
        "KqsBodyLength": str(len(message.body)),
        "SenderId": message.sender_id,
        "SentTimestamp": str(message.sent_ms),
    }
    fact = browsed.fact
    receive_count = fact.receive_count if fact else 0
    if browsed.status not in (Status.UNKNOWN, Status.DELETED):  # (the lease store forgot it)
        attributes["ApproximateReceiveCount"] = str(receive_count)
    if fact is not None and fact.receive_count:
        attributes["ApproximateFirstReceiveTimestamp"] = str(fact.first_receive_ms)
    if browsed.status in (Status.IN_FLIGHT, Status.DELAYED) and fact is not None:
        attributes["KqsVisibleAtTimestamp"] = str(fact.visible_at_ms)
    for name, value in (
        ("MessageGroupId", message.message_group_id),
        ("MessageDeduplicationId", message.deduplication_id),
        ("DeadLetterQueueSourceArn", message.dead_letter_source_arn),
        ("AWSTraceHeader", message.aws_trace_header),
    ):
        if value is not None:
            attributes[name] = value
    origin = ReplayOrigin.decode(message.replay_of)
    if origin is not None:
        attributes["KqsReplayOfMessageId"] = origin.message_id
        attributes["KqsReplayOfSentTimestamp"] = str(origin.sent_ms)
    out: Result = {
        "MessageId": message.message_id,
        "MD5OfBody": message.md5_of_body(),
        "Body": body[:preview],
        "Attributes": attributes,
    }
    if message.attributes:
        out["MD5OfMessageAttributes"] = md5_of_attributes(message.attributes)
        out["MessageAttributes"] = {n: v.to_json() for n, v in message.attributes.items()}
    return out


async def handle(req: PeekMessagesRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    page = await ctx.runtime.browser.page(
        record, req.max_number_of_messages, req.newest_first, req.statuses, req.next_token
    )
    # With KMS keys, the data keys to unwrap are unwrapped in a thread, not on the event loop.
    await ctx.runtime.messages.encryption.ready_to_open(b.logged.message for b in page.messages)
    result: Result = {
        "Messages": [
            message_entry(b, req.body_preview_length, ctx.runtime.messages.encryption)
            for b in page.messages
        ],
        "OldestAvailableTimestamp": page.oldest_available_ms,
        "MessageRetentionPeriod": page.retention_s,
    }
    if page.topic_retention_ms is not None:
        result["TopicRetentionMs"] = page.topic_retention_ms
    if page.next_token is not None:
        result["NextToken"] = page.next_token
    return result


ACTION = Action("PeekMessages", decode, handle)
