"""Stacks, resources, events and change sets in the shapes of CloudFormation's API (botocore's
`cloudformation/2010-05-15` model): member names, ISO 8601 times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.cloudformation import parameters
from gateway.cloudformation.records import ChangeSet, ResourceState, Stack, StackEvent
from gateway.cloudformation.template import Template, parse

NOT_CHECKED = {"StackDriftStatus": "NOT_CHECKED"}


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _shown_parameters(stack: Stack) -> list[dict[str, str]]:
    if not stack.template_body:
        return []
    return parameters.shown(parse(stack.template_body), stack.parameters)


def stack(s: Stack) -> dict[str, Any]:
    return {
        "StackId": s.stack_id,
        "StackName": s.name,
        "Description": s.description,
        "Parameters": _shown_parameters(s),
        "CreationTime": iso(s.created_ms),
        "DeletionTime": iso(s.deleted_ms),
        "LastUpdatedTime": iso(s.updated_ms),
        "RollbackConfiguration": {},
        "StackStatus": s.status,
        "StackStatusReason": s.status_reason or None,
        "DisableRollback": s.disable_rollback,
        "NotificationARNs": s.notification_arns,
        "Capabilities": s.capabilities,
        "Outputs": s.outputs,
        "Tags": tag_list(s.tags),
        "EnableTerminationProtection": s.termination_protection,
        "DriftInformation": NOT_CHECKED,
    }


def stack_summary(s: Stack) -> dict[str, Any]:
    return {
        "StackId": s.stack_id,
        "StackName": s.name,
        "TemplateDescription": s.description,
        "CreationTime": iso(s.created_ms),
        "LastUpdatedTime": iso(s.updated_ms),
        "DeletionTime": iso(s.deleted_ms),
        "StackStatus": s.status,
        "StackStatusReason": s.status_reason or None,
        "DriftInformation": NOT_CHECKED,
    }


def event(s: Stack, e: StackEvent) -> dict[str, Any]:
    return {
        "StackId": s.stack_id,
        "EventId": e.event_id,
        "StackName": s.name,
        "LogicalResourceId": e.logical_id,
        "PhysicalResourceId": e.physical_id,
        "ResourceType": e.type,
        "Timestamp": iso(e.timestamp_ms),
        "ResourceStatus": e.status,
        "ResourceStatusReason": e.reason or None,
        "ResourceProperties": e.properties or None,
        "ClientRequestToken": e.client_request_token or None,
    }


def resource(s: Stack, r: ResourceState) -> dict[str, Any]:
    return {
        "StackName": s.name,
        "StackId": s.stack_id,
        "LogicalResourceId": r.logical_id,
        "PhysicalResourceId": r.physical_id,
        "ResourceType": r.type,
        "Timestamp": iso(r.updated_ms),
        "ResourceStatus": r.status,
        "ResourceStatusReason": r.reason or None,
        "DriftInformation": {"StackResourceDriftStatus": "NOT_CHECKED"},
    }


def resource_detail(s: Stack, r: ResourceState) -> dict[str, Any]:
    detail = resource(s, r)
    detail["LastUpdatedTimestamp"] = detail.pop("Timestamp")
    detail["Metadata"] = "{}"
    return detail


def resource_summary(r: ResourceState) -> dict[str, Any]:
    return {
        "LogicalResourceId": r.logical_id,
        "PhysicalResourceId": r.physical_id,
        "ResourceType": r.type,
        "LastUpdatedTimestamp": iso(r.updated_ms),
        "ResourceStatus": r.status,
        "ResourceStatusReason": r.reason or None,
        "DriftInformation": {"StackResourceDriftStatus": "NOT_CHECKED"},
    }


def change_set(s: Stack, c: ChangeSet) -> dict[str, Any]:
    shown = parameters.shown(parse(c.template_body), c.parameters) if c.template_body else []
    return {
        "ChangeSetName": c.name,
        "ChangeSetId": c.change_set_id,
        "StackId": s.stack_id,
        "StackName": s.name,
        "Description": c.description or None,
        "Parameters": shown,
        "CreationTime": iso(c.created_ms),
        "ExecutionStatus": c.execution_status,
        "Status": c.status,
        "StatusReason": c.status_reason or None,
        "NotificationARNs": [],
        "RollbackConfiguration": {},
        "Capabilities": c.capabilities,
        "Tags": tag_list(c.tags),
        "Changes": c.changes,
        "IncludeNestedStacks": False,
    }


def change_set_summary(s: Stack, c: ChangeSet) -> dict[str, Any]:
    return {
        "StackId": s.stack_id,
        "StackName": s.name,
        "ChangeSetId": c.change_set_id,
        "ChangeSetName": c.name,
        "ExecutionStatus": c.execution_status,
        "Status": c.status,
        "StatusReason": c.status_reason or None,
        "CreationTime": iso(c.created_ms),
        "Description": c.description or None,
        "IncludeNestedStacks": False,
    }


def template_parameters(template: Template, with_type: bool) -> list[dict[str, Any]]:
    """The declared parameters as ValidateTemplate (`with_type` False) or GetTemplateSummary
    answers them."""
    out = []
    for name, declaration in template.parameters.items():
        item: dict[str, Any] = {"ParameterKey": name}
        if "Default" in declaration:
            item["DefaultValue"] = parameters.resolve_default(declaration["Default"])
        if with_type:
            item["ParameterType"] = declaration["Type"]
        item["NoEcho"] = str(declaration.get("NoEcho", "false")).lower() == "true"
        if "Description" in declaration:
            item["Description"] = str(declaration["Description"])
        if with_type and "AllowedValues" in declaration:
            item["ParameterConstraints"] = {
                "AllowedValues": [str(v) for v in declaration["AllowedValues"]]
            }
        out.append(item)
    return out
