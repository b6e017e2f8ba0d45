"""The CloudFormation and STS endpoints of the gateway: one awsQuery request in, its XML
answer out (status, body). The HTTP edge (`gateway/http/other_services.py`) authenticates the
request and builds the `CfnContext`; this module runs the action and renders the result or
the error in the service's own namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.cloudformation import change_set_actions, describe_actions, stack_actions, wire
from gateway.cloudformation.context import CfnContext
from gateway.cloudformation.errors import CloudFormationError, InvalidAction

log = logging.getLogger("kqs.cloudformation")

CfnAction = Callable[[dict[str, Any], CfnContext], Awaitable[dict[str, Any]]]
ACTIONS: dict[str, CfnAction] = {
    **stack_actions.ACTIONS,
    **change_set_actions.ACTIONS,
    **describe_actions.ACTIONS,
}
STS_ACTIONS = frozenset({"GetCallerIdentity"})


async def answer_cloudformation(
    action: str, params: dict[str, Any], ctx: CfnContext
) -> tuple[int, str]:
    namespace = wire.CLOUDFORMATION_NAMESPACE
    try:
        handler = ACTIONS.get(action)
        if handler is None:
            raise InvalidAction(f"Could not find operation {action} for version 2010-05-15")
        result = await handler(params, ctx)
        return 200, wire.render_result(action, result, ctx.request_id, namespace)
    except CloudFormationError as error:
        return error.http_status, wire.render_error(
            error.code, error.message, error.sender_fault, ctx.request_id, namespace
        )


def answer_sts(action: str, ctx: CfnContext) -> tuple[int, str]:
    """STS: `GetCallerIdentity` (what the CDK asks first), answered from the signature."""
    namespace = wire.STS_NAMESPACE
    if action != "GetCallerIdentity":
        return 400, wire.render_error(
            "InvalidAction",
            f"KQS answers only GetCallerIdentity of STS, not {action}",
            True,
            ctx.request_id,
            namespace,
        )
    result = {
        "UserId": ctx.caller.user_id,
        "Account": ctx.caller.account_id,
        "Arn": ctx.caller.arn,
    }
    return 200, wire.render_result(action, result, ctx.request_id, namespace)


def error_answer(error: CloudFormationError, request_id: str, sts: bool) -> tuple[int, str]:
    namespace = wire.STS_NAMESPACE if sts else wire.CLOUDFORMATION_NAMESPACE
    return error.http_status, wire.render_error(
        error.code, error.message, error.sender_fault, request_id, namespace
    )
