"""The change sets: CreateChangeSet (worked out at once: CREATE_COMPLETE, or FAILED with
AWS's "didn't contain changes" reason, which `aws cloudformation deploy` reads as "No changes
to deploy"), DescribeChangeSet, ExecuteChangeSet, DeleteChangeSet, ListChangeSets.

A CREATE change set makes the stack in REVIEW_IN_PROGRESS, as AWS does; executing any change
set runs the stack operation to its end and removes the stack's change sets.
"""

from __future__ import annotations

import uuid
from typing import Any

from gateway.cloudformation import parameters, requests, shapes
from gateway.cloudformation.changes import plan
from gateway.cloudformation.context import CfnContext
from gateway.cloudformation.errors import (
    AlreadyExists,
    ChangeSetNotFound,
    InvalidChangeSetStatus,
    ValidationError,
)
from gateway.cloudformation.records import ChangeSet, Stack
from gateway.cloudformation.stack_actions import (
    UPDATABLE,
    check_resolvable,
    engine,
    new_stack,
    no_changes,
)
from gateway.cloudformation.template import parse

NO_CHANGES = (
    "The submitted information didn't contain changes. Submit different information to "
    "create a change set."
)
Result = dict[str, Any]


async def create_change_set(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack_name = requests.checked_name(requests.required(params, "StackName"), "stackName")
    name = requests.checked_name(requests.required(params, "ChangeSetName"), "changeSetName")
    kind = requests.text(params, "ChangeSetType") or "UPDATE"
    if kind not in ("CREATE", "UPDATE"):
        raise ValidationError(f"ChangeSetType {kind} is not supported by KQS (CREATE, UPDATE)")
    async with ctx.store.lock(ctx.region, ctx.account_id, stack_name):
        stack = ctx.store.current(ctx.region, ctx.account_id, stack_name)
        if kind == "CREATE":
            if stack is not None and stack.status != "REVIEW_IN_PROGRESS":
                raise ValidationError(
                    f"Stack [{stack_name}] already exists and cannot be created again with "
                    f"the changeSet [{name}]."
                )
            if stack is None:
                stack = new_stack(ctx, stack_name, "REVIEW_IN_PROGRESS")
        elif stack is None or stack.status == "REVIEW_IN_PROGRESS":
            raise ValidationError(f"Stack [{stack_name}] does not exist")
        elif stack.status not in UPDATABLE:
            raise ValidationError(
                f"Stack:{stack.stack_id} is in {stack.status} state and can not be updated."
            )
        if any(c.name == name for c in stack.change_sets.values()):
            raise AlreadyExists(f"ChangeSet [{name}] already exists")
        body = requests.template_body(params, stack if kind == "UPDATE" else None)
        template = parse(body)
        previous = stack.parameters if kind == "UPDATE" else {}
        values = parameters.resolve(template, requests.given_parameters(params), previous)
        tags = requests.tags(params)
        tags = stack.tags if tags is None else tags
        check_resolvable(ctx, stack, template, values)
        changes = plan(stack, template, values, ctx.store)
        change_set = ChangeSet(
            change_set_id=(
                f"arn:aws:cloudformation:{ctx.region}:{ctx.account_id}:changeSet/{name}/"
                f"{uuid.uuid4()}"
            ),
            name=name,
            change_set_type=kind,
            status="CREATE_COMPLETE",
            execution_status="AVAILABLE",
            status_reason="",
            template_body=body,
            parameters=values,
            capabilities=requests.strings(params, "Capabilities"),
            tags=tags,
            description=requests.text(params, "Description") or "",
            created_ms=ctx.now_ms(),
            changes=changes,
        )
        if kind == "UPDATE" and no_changes(stack, body, values, tags, changes):
            change_set.status = "FAILED"
            change_set.execution_status = "UNAVAILABLE"
            change_set.status_reason = NO_CHANGES
        stack.change_sets[change_set.change_set_id] = change_set
        await ctx.store.save(stack)
    return {"Id": change_set.change_set_id, "StackId": stack.stack_id}


def _find(params: dict[str, Any], ctx: CfnContext) -> tuple[Stack, ChangeSet]:
    name = requests.required(params, "ChangeSetName")
    stack_name = requests.text(params, "StackName")
    if name.startswith("arn:"):
        for stack in ctx.store.all(ctx.region, ctx.account_id):
            if name in stack.change_sets:
                return stack, stack.change_sets[name]
        raise ChangeSetNotFound(f"ChangeSet [{name}] does not exist")
    if not stack_name:
        raise ValidationError(
            "StackName must be specified if ChangeSetName is not specified as an ARN."
        )
    found = ctx.store.find(ctx.region, ctx.account_id, stack_name)
    if found is None:
        raise ChangeSetNotFound(f"ChangeSet [{name}] does not exist")
    for change_set in found.change_sets.values():
        if change_set.name == name:
            return found, change_set
    raise ChangeSetNotFound(f"ChangeSet [{name}] does not exist")


async def describe_change_set(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack, change_set = _find(params, ctx)
    return shapes.change_set(stack, change_set)


async def execute_change_set(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack, change_set = _find(params, ctx)
    async with ctx.store.lock(ctx.region, ctx.account_id, stack.name):
        stack, change_set = _find({**params, "ChangeSetName": change_set.change_set_id}, ctx)
        if change_set.execution_status != "AVAILABLE":
            raise InvalidChangeSetStatus(
                f"ChangeSet [{change_set.change_set_id}] cannot be executed in its current "
                f"status of [{change_set.status}]"
            )
        before = stack.copy()
        stack.template_body = change_set.template_body
        stack.parameters = change_set.parameters
        stack.tags = change_set.tags
        stack.capabilities = change_set.capabilities
        stack.change_sets = {}
        if "DisableRollback" in params:
            stack.disable_rollback = requests.flag(params, "DisableRollback")
        runner = engine(ctx, params)
        if change_set.change_set_type == "CREATE":
            stack.description = parse(stack.template_body).description
            await runner.create(stack)
        else:
            await runner.update(stack, before)
    return {}


async def delete_change_set(params: dict[str, Any], ctx: CfnContext) -> Result:
    name = requests.required(params, "ChangeSetName")
    stack_name = requests.text(params, "StackName")
    if not name.startswith("arn:") and stack_name:
        stack = ctx.store.find(ctx.region, ctx.account_id, stack_name)
        if stack is not None and all(c.name != name for c in stack.change_sets.values()):
            # AWS: "successful as long as the stack exists (even if the change set does
            # not)", which the CDK relies on before each deploy (cleanupOldChangeset).
            return {}
    stack, change_set = _find(params, ctx)
    async with ctx.store.lock(ctx.region, ctx.account_id, stack.name):
        stack, change_set = _find({**params, "ChangeSetName": change_set.change_set_id}, ctx)
        del stack.change_sets[change_set.change_set_id]
        await ctx.store.save(stack)
    return {}


async def list_change_sets(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack = requests.stack_named(
        ctx.store, ctx.region, ctx.account_id, requests.required(params, "StackName")
    )
    return {"Summaries": [shapes.change_set_summary(stack, c) for c in stack.change_sets.values()]}


ACTIONS = {
    "CreateChangeSet": create_change_set,
    "DescribeChangeSet": describe_change_set,
    "ExecuteChangeSet": execute_change_set,
    "DeleteChangeSet": delete_change_set,
    "ListChangeSets": list_change_sets,
}
