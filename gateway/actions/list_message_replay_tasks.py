"""ListMessageReplayTasks (KQS's own): the most recent replay tasks of a queue, with their
progress (10 by default and at most)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.sqs.replay.tasks import HISTORY, ReplaySummary


@dataclass(frozen=True)
class ListMessageReplayTasksRequest:
    queue_url: str
    max_results: int


def decode(p: Params) -> ListMessageReplayTasksRequest:
    return ListMessageReplayTasksRequest(
        queue_url=p.required_str("QueueUrl"),
        max_results=p.int_in_range("MaxResults", 1, HISTORY) or HISTORY,
    )


def entry(task: ReplaySummary) -> Result:
    """One task; optional members only when they have a value."""
    # The handle of every task, not only of a running one as ListMessageMoveTasks does: it
    # names the task for `kqs replay`, which follows it to its end.
    out: Result = {"TaskHandle": task.handle}
    out["Status"] = task.status.value
    out["SourceArn"] = task.source_arn
    out["DestinationArn"] = task.destination_arn
    if task.since_ms is not None:
        out["SinceTimestamp"] = task.since_ms
    if task.until_ms is not None:
        out["UntilTimestamp"] = task.until_ms
    if task.max_per_second is not None:
        out["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    out["ApproximateNumberOfMessagesReplayed"] = task.replayed
    out["ApproximateNumberOfMessagesToReplay"] = task.to_replay
    if task.failure_reason is not None:
        out["FailureReason"] = task.failure_reason
    out["StartedTimestamp"] = task.started_ms
    return out


async def handle(req: ListMessageReplayTasksRequest, ctx: RequestContext) -> Result:
    source = ctx.queue(req.queue_url)
    tasks = await ctx.runtime.replay_tasks.summaries(source, req.max_results)
    return {"Tasks": [entry(task) for task in tasks]}


ACTION = Action("ListMessageReplayTasks", decode, handle)
