"""CancelMessageMoveTask: stop a RUNNING move task; messages already moved stay moved."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.action import Action, Result
from gateway.actions.start_message_move_task import NOT_FOUND
from gateway.context import RequestContext
from gateway.errors import InvalidParameterValue, ResourceNotFound
from gateway.move_tasks import MoveTaskStatus, decode_handle
from gateway.params import Params


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
    if ctx.runtime.registry.by_arn(source_arn) is None:
        raise ResourceNotFound(NOT_FOUND.format(name="SourceArn"))
    task = ctx.runtime.move_tasks.find(task_id)
    if task is None:
        raise ResourceNotFound("Task does not exist.")
    if task.status is not MoveTaskStatus.RUNNING:
        # The API model lists ResourceNotFoundException as this action's only sender error.
        raise ResourceNotFound(
            f"Only a RUNNING task can be cancelled; this task is {task.status.value}."
        )
    return {"ApproximateNumberOfMessagesMoved": ctx.runtime.move_tasks.cancel(task)}


ACTION = Action("CancelMessageMoveTask", decode, handle)
