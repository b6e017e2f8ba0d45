"""ChangeMessageVisibility: restart a lease from now, once, within 12 h of the receive."""

from __future__ import annotations

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common import limits
from gateway.common.errors import InvalidParameterValue, MissingParameter
from lease_store.errors import MessageNotAvailable
from lease_store.value_class import value_class


@value_class
class ChangeMessageVisibilityRequest:
    queue_url: str
    receipt_handle: str
    visibility_timeout: int


def decode_entry(p: Params, queue_url: str) -> ChangeMessageVisibilityRequest:
    timeout = p.int_in_range("VisibilityTimeout", 0, limits.MAX_VISIBILITY_TIMEOUT_S)
    if timeout is None:
        raise MissingParameter.named("VisibilityTimeout")
    return ChangeMessageVisibilityRequest(
        queue_url=queue_url,
        receipt_handle=p.required_str("ReceiptHandle"),
        visibility_timeout=timeout,
    )


def decode(p: Params) -> ChangeMessageVisibilityRequest:
    return decode_entry(p, p.required_str("QueueUrl"))


async def handle(req: ChangeMessageVisibilityRequest, ctx: RequestContext) -> Result:
    record = ctx.queue(req.queue_url)
    try:
        await ctx.runtime.messages.change_visibility(
            record, req.receipt_handle, req.visibility_timeout
        )
    except MessageNotAvailable:
        raise not_available(req.receipt_handle) from None
    return {}


def not_available(receipt_handle: str) -> InvalidParameterValue:
    """A handle whose message is gone or not in flight: SQS's answer (not the domain error)."""
    return InvalidParameterValue(
        f"Value {receipt_handle} for parameter ReceiptHandle is invalid. Reason: "
        "Message does not exist or is not available for visibility timeout change."
    )


ACTION = Action("ChangeMessageVisibility", decode, handle)
