"""CancelMessageReplayTask (KQS's own): stop a RUNNING replay task after the batch in hand;
what it replayed stays replayed."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import InvalidParameterValue, ResourceNotFound
from gateway.sqs.move_tasks import decode_handle


@dataclass(frozen=True)
class CancelMessageReplayTaskRequest:
    task_handle: str


def decode(p: Params) -> CancelMessageReplayTaskRequest:
    return CancelMessageReplayTaskRequest(task_handle=p.required_str("TaskHandle"))


async def handle(req: CancelMessageReplayTaskRequest, ctx: RequestContext) -> Result:
    decoded = decode_handle(req.task_handle)
    if decoded is None:
        raise InvalidParameterValue("Value for parameter TaskHandle is invalid.")
    task_id, source_arn = decoded
    source = ctx.runtime.registry.by_arn(source_arn)
    if source is None:
        raise ResourceNotFound("Task does not exist.")
    replayed = await ctx.runtime.replay_tasks.cancel(source, task_id)
    return {"ApproximateNumberOfMessagesReplayed": replayed}


ACTION = Action("CancelMessageReplayTask", decode, handle)
