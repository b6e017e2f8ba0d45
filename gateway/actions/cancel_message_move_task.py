"""CancelMessageMoveTask: stop a RUNNING move task; messages already moved stay moved."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.actions.start_message_move_task import NOT_FOUND
from gateway.common.errors import InvalidParameterValue, ResourceNotFound
from gateway.sqs.move_tasks import decode_handle


@dataclass(frozen=True)
class CancelMessageMoveTaskRequest:
    task_handle: str


def decode(p: Params) -> CancelMessageMoveTaskRequest:
    return CancelMessageMoveTaskRequest(task_handle=p.required_str("TaskHandle"))


async def handle(req: CancelMessageMoveTaskRequest, ctx: RequestContext) -> Result:
    decoded = decode_handle(req.task_handle)
    if decoded is None:
        raise InvalidParameterValue("Value for parameter TaskHandle is invalid.")
    task_id, source_arn = decoded
    source = ctx.runtime.registry.by_arn(source_arn)
    if source is None:
        raise ResourceNotFound(NOT_FOUND.format(name="SourceArn"))
    moved = await ctx.runtime.move_tasks.cancel(source, task_id)  # on the source's home
    return {"ApproximateNumberOfMessagesMoved": moved}


ACTION = Action("CancelMessageMoveTask", decode, handle)
