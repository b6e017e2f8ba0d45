"""The reading actions: DescribeStacks, ListStacks, DescribeStackEvents,
DescribeStackResource(s), ListStackResources, GetTemplate, GetTemplateSummary and
ValidateTemplate. Lists come whole, in one page (no NextToken)."""

from __future__ import annotations

from typing import Any

from gateway.cloudformation import requests, shapes
from gateway.cloudformation.context import CfnContext
from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.records import Stack
from gateway.cloudformation.template import parse

Result = dict[str, Any]


def _stack(params: dict[str, Any], ctx: CfnContext) -> Stack:
    name = requests.required(params, "StackName")
    return requests.stack_named(ctx.store, ctx.region, ctx.account_id, name)


async def describe_stacks(params: dict[str, Any], ctx: CfnContext) -> Result:
    name = requests.text(params, "StackName")
    if name:
        stacks = [requests.stack_named(ctx.store, ctx.region, ctx.account_id, name)]
    else:
        stacks = [s for s in ctx.store.all(ctx.region, ctx.account_id) if not s.deleted]
    return {"Stacks": [shapes.stack(s) for s in stacks]}


async def list_stacks(params: dict[str, Any], ctx: CfnContext) -> Result:
    wanted = set(requests.strings(params, "StackStatusFilter"))
    stacks = [
        s for s in ctx.store.all(ctx.region, ctx.account_id) if (not wanted or s.status in wanted)
    ]
    return {"StackSummaries": [shapes.stack_summary(s) for s in stacks]}


async def describe_stack_events(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack = _stack(params, ctx)
    return {"StackEvents": [shapes.event(stack, e) for e in reversed(stack.events)]}


def _resources(stack: Stack) -> list[Any]:
    return [
        r
        for r in stack.resources.values()
        if r.status != "DELETE_COMPLETE" or stack.deleted or stack.status.startswith("ROLLBACK")
    ]


async def describe_stack_resource(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack = _stack(params, ctx)
    logical_id = requests.required(params, "LogicalResourceId")
    state = stack.resources.get(logical_id)
    if state is None:
        raise ValidationError(f"Resource {logical_id} does not exist for stack {stack.name}")
    return {"StackResourceDetail": shapes.resource_detail(stack, state)}


async def describe_stack_resources(params: dict[str, Any], ctx: CfnContext) -> Result:
    physical_id = requests.text(params, "PhysicalResourceId")
    if requests.text(params, "StackName"):
        stack = _stack(params, ctx)
    elif physical_id:
        found = [
            s
            for s in ctx.store.all(ctx.region, ctx.account_id)
            if any(r.physical_id == physical_id for r in s.resources.values())
        ]
        if not found:
            raise ValidationError(f"Stack for {physical_id} does not exist")
        stack = found[0]
    else:
        raise ValidationError("Either StackName or PhysicalResourceId must be specified.")
    logical_id = requests.text(params, "LogicalResourceId")
    states = [r for r in _resources(stack) if (not logical_id or r.logical_id == logical_id)]
    return {"StackResources": [shapes.resource(stack, r) for r in states]}


async def list_stack_resources(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack = _stack(params, ctx)
    return {"StackResourceSummaries": [shapes.resource_summary(r) for r in _resources(stack)]}


async def get_template(params: dict[str, Any], ctx: CfnContext) -> Result:
    stack = _stack(params, ctx)
    body = stack.template_body
    change_set_name = requests.text(params, "ChangeSetName")
    if change_set_name:
        matches = [
            c for c in stack.change_sets.values() if change_set_name in (c.name, c.change_set_id)
        ]
        if not matches:
            raise ValidationError(f"ChangeSet [{change_set_name}] does not exist")
        body = matches[0].template_body
    return {"TemplateBody": body, "StagesAvailable": ["Original", "Processed"]}


async def get_template_summary(params: dict[str, Any], ctx: CfnContext) -> Result:
    if requests.text(params, "StackName"):
        body = _stack(params, ctx).template_body
    else:
        body = requests.template_body(params)
    template = parse(body)
    return {
        "Parameters": shapes.template_parameters(template, with_type=True),
        "Description": template.description,
        "Capabilities": [],
        "ResourceTypes": sorted({str(r["Type"]) for r in template.resources.values()}),
        "Version": str(template.document.get("AWSTemplateFormatVersion", "2010-09-09")),
        "DeclaredTransforms": [],
        "ResourceIdentifierSummaries": [
            {
                "ResourceType": "AWS::SQS::Queue",
                "LogicalResourceIds": [
                    lid for lid, r in template.resources.items() if r["Type"] == "AWS::SQS::Queue"
                ],
                "ResourceIdentifiers": ["QueueUrl"],
            }
        ]
        if any(r["Type"] == "AWS::SQS::Queue" for r in template.resources.values())
        else [],
    }


async def validate_template(params: dict[str, Any], ctx: CfnContext) -> Result:
    template = parse(requests.template_body(params))
    return {
        "Parameters": shapes.template_parameters(template, with_type=False),
        "Description": template.description,
        "Capabilities": [],
        "DeclaredTransforms": [],
    }


ACTIONS = {
    "DescribeStacks": describe_stacks,
    "ListStacks": list_stacks,
    "DescribeStackEvents": describe_stack_events,
    "DescribeStackResource": describe_stack_resource,
    "DescribeStackResources": describe_stack_resources,
    "ListStackResources": list_stack_resources,
    "GetTemplate": get_template,
    "GetTemplateSummary": get_template_summary,
    "ValidateTemplate": validate_template,
}
