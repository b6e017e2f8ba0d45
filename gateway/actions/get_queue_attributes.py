"""GetQueueAttributes: stored settings, identity, timestamps and the exact message counters."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.sqs.queue_attributes import requested_names
from gateway.sqs.queues import effective_attributes, is_fifo


@dataclass(frozen=True)
class GetQueueAttributesRequest:
    queue_url: str
    attribute_names: list[str]


def decode(p: Params) -> GetQueueAttributesRequest:
    return GetQueueAttributesRequest(
        queue_url=p.required_str("QueueUrl"), attribute_names=p.str_list("AttributeNames")
    )


async def handle(req: GetQueueAttributesRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    names = requested_names(req.attribute_names, fifo=is_fifo(record))
    if not names:
        return {}  # SQS answers no attributes when none are asked for
    counts = await ctx.runtime.messages.queue_counts(record)
    values = {
        **effective_attributes(record),
        "QueueArn": ctx.queue_arn(record),
        "CreatedTimestamp": str(record.created_s),
        "LastModifiedTimestamp": str(record.modified_s),
        "ApproximateNumberOfMessages": str(counts.visible),
        "ApproximateNumberOfMessagesNotVisible": str(counts.in_flight),
        "ApproximateNumberOfMessagesDelayed": str(counts.delayed),
    }
    if values.get("KmsMasterKeyId"):
        # KMS and SQS-managed encryption exclude each other; a KMS queue shows the key's
        # reuse period (default 300 s) and SqsManagedSseEnabled false, as SQS does.
        values["SqsManagedSseEnabled"] = "false"
        values.setdefault("KmsDataKeyReusePeriodSeconds", "300")
    elif values.get("KmsDataKeyReusePeriodSeconds") == "300":
        # Set to its default on a queue without a KMS key, it is not listed: AWS lists none
        # then (KQS issue 54's comparison with AWS; LocalStack's DELETE_IF_DEFAULT agrees)
        del values["KmsDataKeyReusePeriodSeconds"]
    ctx.runtime.messages.encryption.reported(values)
    # Unset optional attributes (Policy, RedrivePolicy, ...) are left out, as in SQS.
    if not ctx.owns(record) and not ctx.is_admin:
        values.pop("Policy", None)  # only the queue's owner sees its policy
    attributes = {name: values[name] for name in names if values.get(name, "") != ""}
    return {"Attributes": attributes} if attributes else {}


ACTION = Action("GetQueueAttributes", decode, handle)
