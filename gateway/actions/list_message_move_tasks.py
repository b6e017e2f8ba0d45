"""ListMessageMoveTasks: the most recent move tasks of a source queue (1 by default, 10 at most)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.actions.start_message_move_task import queue_by_arn
from gateway.common import limits
from gateway.sqs.move_tasks import MoveTaskStatus, MoveTaskSummary


@dataclass(frozen=True)
class ListMessageMoveTasksRequest:
    source_arn: str
    max_results: int


def decode(p: Params) -> ListMessageMoveTasksRequest:
    return ListMessageMoveTasksRequest(
        source_arn=p.required_str("SourceArn"),
        max_results=p.int_in_range("MaxResults", 1, limits.MAX_MOVE_TASK_RESULTS) or 1,
    )


def entry(task: MoveTaskSummary) -> Result:
    """A ListMessageMoveTasksResultEntry; optional members only when they have a value."""
    out: Result = {}
    if task.status is MoveTaskStatus.RUNNING:
        out["TaskHandle"] = task.handle  # only a running task can be cancelled
    out["Status"] = task.status.value
    out["SourceArn"] = task.source_arn
    if task.destination_arn is not None:
        out["DestinationArn"] = task.destination_arn
    if task.max_per_second is not None:
        out["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    out["ApproximateNumberOfMessagesMoved"] = task.moved
    out["ApproximateNumberOfMessagesToMove"] = task.to_move
    if task.failure_reason is not None:
        out["FailureReason"] = task.failure_reason
    out["StartedTimestamp"] = task.started_ms
    return out


async def handle(req: ListMessageMoveTasksRequest, ctx: RequestContext) -> Result:
    source = queue_by_arn(ctx, req.source_arn, "SourceArn")
    tasks = await ctx.runtime.move_tasks.summaries(source, req.max_results)
    return {"Results": [entry(task) for task in tasks]}


ACTION = Action("ListMessageMoveTasks", decode, handle)
