"""AWS::SQS::QueuePolicy (one policy document on several queues) and
AWS::SQS::QueueInlinePolicy (one document on one queue): each sets the queues' `Policy`
attribute through SetQueueAttributes, and removes it when deleted.

A QueuePolicy's `Ref` is its generated id; it changes its queues in place (a queue left out
loses the policy). A QueueInlinePolicy's `Ref` is the queue URL it is attached to (a guess:
AWS's page names no Ref value); another Queue replaces it.
"""

from __future__ import annotations

from typing import Any

from gateway.cloudformation.errors import ResourceFailed
from gateway.cloudformation.resources.handler import HandlerEnv, Made, policy_text

MAX_ID_LENGTH = 128


class QueuePolicyHandler:
    type_name = "AWS::SQS::QueuePolicy"
    properties = frozenset(("PolicyDocument", "Queues"))
    required = frozenset(("PolicyDocument", "Queues"))
    replaced_by: frozenset[str] = frozenset()

    async def create(self, env: HandlerEnv, props: dict[str, Any]) -> Made:
        physical_id = env.physical_name(MAX_ID_LENGTH)
        policy = policy_text(props["PolicyDocument"])
        for url in _queues(props):
            await env.sqs.set_attributes(url, {"Policy": policy})
        return Made(physical_id, {"Id": physical_id})

    async def update(
        self, env: HandlerEnv, physical_id: str, old: dict[str, Any], new: dict[str, Any]
    ) -> Made:
        kept = _queues(new)
        for url in _queues(old):
            if url not in kept:
                await env.sqs.clear_policy(url)
        policy = policy_text(new["PolicyDocument"])
        for url in kept:
            await env.sqs.set_attributes(url, {"Policy": policy})
        return Made(physical_id, {"Id": physical_id})

    async def delete(self, env: HandlerEnv, physical_id: str, props: dict[str, Any]) -> None:
        for url in _queues(props):
            await env.sqs.clear_policy(url)


class QueueInlinePolicyHandler:
    type_name = "AWS::SQS::QueueInlinePolicy"
    properties = frozenset(("PolicyDocument", "Queue"))
    required = frozenset(("PolicyDocument", "Queue"))
    replaced_by = frozenset(("Queue",))

    async def create(self, env: HandlerEnv, props: dict[str, Any]) -> Made:
        url = str(props["Queue"])
        await env.sqs.set_attributes(url, {"Policy": policy_text(props["PolicyDocument"])})
        return Made(url, {})

    async def update(
        self, env: HandlerEnv, physical_id: str, old: dict[str, Any], new: dict[str, Any]
    ) -> Made:
        return await self.create(env, new)

    async def delete(self, env: HandlerEnv, physical_id: str, props: dict[str, Any]) -> None:
        await env.sqs.clear_policy(str(props["Queue"]))


def _queues(props: dict[str, Any]) -> list[str]:
    queues = props["Queues"]
    if not isinstance(queues, list) or not all(isinstance(q, str) for q in queues):
        raise ResourceFailed("Queues must be a list of queue URLs")
    return queues
