"""CreateStack, UpdateStack, DeleteStack: validate at once (a template or parameter error is
the call's ValidationError, before anything is made), then run the operation to its end."""

from __future__ import annotations

import uuid
from typing import Any

from gateway.cloudformation import parameters, requests
from gateway.cloudformation.changes import included_order, plan
from gateway.cloudformation.context import CfnContext
from gateway.cloudformation.engine import Engine
from gateway.cloudformation.errors import AlreadyExists, ValidationError
from gateway.cloudformation.records import Stack
from gateway.cloudformation.recovery import abandoned, settle
from gateway.cloudformation.scope import stack_scope
from gateway.cloudformation.template import Template, parse

# The states a stack may be updated (or have an update change set) from.
UPDATABLE = frozenset(
    ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE")
)
Result = dict[str, Any]


def new_stack(ctx: CfnContext, name: str, status: str) -> Stack:
    stack_id = f"arn:aws:cloudformation:{ctx.region}:{ctx.account_id}:stack/{name}/{uuid.uuid4()}"
    return Stack(stack_id, name, ctx.region, ctx.account_id, status, ctx.now_ms())


def engine(ctx: CfnContext, params: dict[str, Any]) -> Engine:
    return Engine(ctx.store, ctx.sqs, ctx.now_ms, requests.text(params, "ClientRequestToken") or "")


def check_resolvable(
    ctx: CfnContext, stack: Stack, template: Template, values: dict[str, str]
) -> None:
    """Evaluate the conditions and every reference the template makes, as far as they go
    before anything is made: an error here is the request's ValidationError."""
    scope = stack_scope(stack, template, values, ctx.store, [], pending=lambda _: True)
    for logical_id in included_order(template, scope):
        scope.resolve(template.resources[logical_id].get("Properties", {}))
    for declaration in template.outputs.values():
        if scope.included(declaration):
            scope.resolve(declaration)


def no_changes(
    stack: Stack, body: str, values: dict[str, str], tags: dict[str, str], changes: list[Any]
) -> bool:
    return (
        not changes
        and body == stack.template_body
        and values == stack.parameters
        and tags == stack.tags
    )


async def create_stack(params: dict[str, Any], ctx: CfnContext) -> Result:
    name = requests.checked_name(requests.required(params, "StackName"), "stackName")
    body = requests.template_body(params)
    template = parse(body)
    async with ctx.store.lock(ctx.region, ctx.account_id, name):
        if ctx.store.current(ctx.region, ctx.account_id, name) is not None:
            raise AlreadyExists(f"Stack [{name}] already exists")
        stack = new_stack(ctx, name, "CREATE_IN_PROGRESS")
        stack.template_body = body
        stack.parameters = parameters.resolve(template, requests.given_parameters(params), {})
        stack.capabilities = requests.strings(params, "Capabilities")
        stack.tags = requests.tags(params) or {}
        stack.notification_arns = requests.strings(params, "NotificationARNs")
        on_failure = requests.text(params, "OnFailure") or "ROLLBACK"
        stack.disable_rollback = (
            requests.flag(params, "DisableRollback") or on_failure == "DO_NOTHING"
        )
        stack.termination_protection = requests.flag(params, "EnableTerminationProtection")
        stack.description = template.description
        check_resolvable(ctx, stack, template, stack.parameters)
        runner = engine(ctx, params)
        stack.client_request_token = runner.token
        await runner.create(stack)
        if on_failure == "DELETE" and stack.status == "ROLLBACK_COMPLETE":
            await runner.delete(stack)
    return {"StackId": stack.stack_id}


async def update_stack(params: dict[str, Any], ctx: CfnContext) -> Result:
    name = requests.required(params, "StackName")
    async with ctx.store.lock(ctx.region, ctx.account_id, _plain_name(name)):
        stack = requests.stack_named(ctx.store, ctx.region, ctx.account_id, name)
        check_updatable(stack)
        body = requests.template_body(params, stack)
        template = parse(body)
        values = parameters.resolve(template, requests.given_parameters(params), stack.parameters)
        tags = requests.tags(params)
        tags = stack.tags if tags is None else tags
        changes = plan(stack, template, values, ctx.store)
        if no_changes(stack, body, values, tags, changes):
            raise ValidationError("No updates are to be performed.")
        check_resolvable(ctx, stack, template, values)
        before = stack.copy()
        stack.template_body, stack.parameters, stack.tags = body, values, tags
        if "Capabilities" in params:
            stack.capabilities = requests.strings(params, "Capabilities")
        if "DisableRollback" in params:
            stack.disable_rollback = requests.flag(params, "DisableRollback")
        await engine(ctx, params).update(stack, before)
    return {"StackId": stack.stack_id}


def check_updatable(stack: Stack) -> None:
    if stack.status not in UPDATABLE:
        raise ValidationError(
            f"Stack:{stack.stack_id} is in {stack.status} state and can not be updated."
        )


async def delete_stack(params: dict[str, Any], ctx: CfnContext) -> Result:
    name = requests.required(params, "StackName")
    async with ctx.store.lock(ctx.region, ctx.account_id, _plain_name(name)):
        stack = ctx.store.find(ctx.region, ctx.account_id, name)
        if stack is None or stack.deleted:
            return {}  # as AWS: deleting a stack that is not there succeeds
        if stack.termination_protection:
            raise ValidationError(
                f"Stack [{stack.name}] cannot be deleted while TerminationProtection is enabled"
            )
        if abandoned(stack, ctx.now_ms()):
            settle(stack, ctx.now_ms())  # its gateway stopped mid-way: delete what it made
        elif stack.status.endswith("_IN_PROGRESS") and stack.status != "REVIEW_IN_PROGRESS":
            raise ValidationError(
                f"Stack [{stack.name}] is in {stack.status} state and can not be deleted now."
            )
        for logical_id in requests.strings(params, "RetainResources"):
            if logical_id in stack.resources:
                stack.resources[logical_id].deletion_policy = "Retain"
        stack.change_sets = {}
        await engine(ctx, params).delete(stack)
    return {}


def _plain_name(name_or_id: str) -> str:
    # arn:aws:cloudformation:<region>:<account>:stack/<name>/<id>
    return name_or_id.split("/")[1] if name_or_id.startswith("arn:") else name_or_id


ACTIONS = {
    "CreateStack": create_stack,
    "UpdateStack": update_stack,
    "DeleteStack": delete_stack,
}
