"""StartMessageMoveTask: redrive a dead-letter queue's messages; returns the TaskHandle.

The source must be the DLQ of at least one queue. Without DestinationArn each message goes
back to the queue it was dead-lettered from. The task itself is `move_tasks.py`, which runs
it on the source queue's home gateway (validated here, on whichever gateway was asked).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common import limits
from gateway.common.errors import InvalidParameterValue, ResourceNotFound
from gateway.sqs.queues import parse_arn, redrive_target
from topology.catalog import QueueRecord

ARN_FORMAT = (
    "You must use this format to specify the {name}: "
    "arn:<partition>:<service>:<region>:<account-id>:<resource-id>"
)
NOT_FOUND = "The resource that you specified for the {name} parameter doesn't exist."


@dataclass(frozen=True)
class StartMessageMoveTaskRequest:
    source_arn: str
    destination_arn: str | None
    max_number_of_messages_per_second: int | None


def decode(p: Params) -> StartMessageMoveTaskRequest:
    return StartMessageMoveTaskRequest(
        source_arn=p.required_str("SourceArn"),
        destination_arn=p.optional_str("DestinationArn") or None,
        max_number_of_messages_per_second=p.int_in_range(
            "MaxNumberOfMessagesPerSecond", 1, limits.MAX_MOVE_MESSAGES_PER_SECOND
        ),
    )


def queue_by_arn(ctx: RequestContext, arn: str, name: str) -> QueueRecord:
    """The queue an ARN parameter of a move-task request names (shared by the three actions)."""
    if parse_arn(arn) is None:
        raise InvalidParameterValue(ARN_FORMAT.format(name=name))
    record = ctx.runtime.registry.by_arn(arn)
    if record is None:
        raise ResourceNotFound(NOT_FOUND.format(name=name))
    return record


def is_dead_letter_queue(ctx: RequestContext, dlq: QueueRecord) -> bool:
    """Whether some queue's RedrivePolicy names `dlq` as its dead-letter queue."""
    for record in ctx.runtime.registry.all_active():
        redrive = redrive_target(record)
        parsed = parse_arn(redrive[0]) if redrive else None
        if parsed is not None and parsed == dlq.queue_id:
            return True
    return False


async def handle(req: StartMessageMoveTaskRequest, ctx: RequestContext) -> Result:
    source = queue_by_arn(ctx, req.source_arn, "SourceArn")
    if not is_dead_letter_queue(ctx, source):
        raise InvalidParameterValue("Source queue must be configured as a Dead Letter Queue.")
    destination_arn = None
    if req.destination_arn is not None:
        destination_arn = ctx.queue_arn(queue_by_arn(ctx, req.destination_arn, "DestinationArn"))
    task_handle = await ctx.runtime.move_tasks.start(
        source, ctx.queue_arn(source), destination_arn, req.max_number_of_messages_per_second
    )
    return {"TaskHandle": task_handle}


ACTION = Action("StartMessageMoveTask", decode, handle)
