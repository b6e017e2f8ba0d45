"""The resource types a stack may hold, by type name."""

from __future__ import annotations

from typing import Any

from gateway.cloudformation.resources.handler import Handler, HandlerEnv, Made
from gateway.cloudformation.resources.policies import (
    QueueInlinePolicyHandler,
    QueuePolicyHandler,
)
from gateway.cloudformation.resources.queue import QueueHandler


class CdkMetadataHandler:
    """AWS::CDK::Metadata: what `cdk synth` adds to report the CDK's version to AWS. It
    makes nothing; accepted so that a CDK app deploys with its default settings."""

    type_name = "AWS::CDK::Metadata"
    properties = frozenset(("Analytics",))
    required: frozenset[str] = frozenset()
    replaced_by: frozenset[str] = frozenset()

    async def create(self, env: HandlerEnv, props: dict[str, Any]) -> Made:
        return Made(env.physical_name(128), {})

    async def update(
        self, env: HandlerEnv, physical_id: str, old: dict[str, Any], new: dict[str, Any]
    ) -> Made:
        return Made(physical_id, {})

    async def delete(self, env: HandlerEnv, physical_id: str, props: dict[str, Any]) -> None:
        return None


HANDLERS: dict[str, Handler] = {
    handler.type_name: handler
    for handler in (
        QueueHandler(),
        QueuePolicyHandler(),
        QueueInlinePolicyHandler(),
        CdkMetadataHandler(),
    )
}

# What `Fn::GetAtt` reads of each type.
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "AWS::SQS::Queue": ("Arn", "QueueName", "QueueUrl"),
    "AWS::SQS::QueuePolicy": ("Id",),
}
