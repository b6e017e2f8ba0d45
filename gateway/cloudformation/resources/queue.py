"""AWS::SQS::Queue: a queue, made and changed through SQS's own CreateQueue,
SetQueueAttributes, TagQueue/UntagQueue and DeleteQueue.

`Ref` is the queue URL; `Fn::GetAtt` gives `Arn`, `QueueName` and `QueueUrl`. Without a
QueueName the name is generated as AWS generates it (`stack-LogicalId-RANDOM`, `.fifo` ending
for a FIFO queue, 80 characters at most). A new QueueName or FifoQueue value replaces the queue
(AWS's "Update requires: Replacement"); every other property changes in place, and a property
removed from the template goes back to SQS's default.
"""

from __future__ import annotations

from typing import Any

from gateway.cloudformation.errors import ResourceFailed
from gateway.cloudformation.resources.handler import HandlerEnv, Made, text
from gateway.sqs.queue_attributes import DEFAULTS, FIFO_DEFAULTS

MAX_NAME_LENGTH = 80
_ATTRIBUTES = (
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "DelaySeconds",
    "FifoQueue",
    "FifoThroughputLimit",
    "KmsDataKeyReusePeriodSeconds",
    "KmsMasterKeyId",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "RedriveAllowPolicy",
    "RedrivePolicy",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
)
# The value a property removed from the template sets again ("" removes the attribute).
_RESET = {
    **DEFAULTS,
    **FIFO_DEFAULTS,
    "KmsDataKeyReusePeriodSeconds": "300",
    "KmsMasterKeyId": "",
    "RedrivePolicy": "",
    "RedriveAllowPolicy": "",
}


class QueueHandler:
    type_name = "AWS::SQS::Queue"
    properties = frozenset((*_ATTRIBUTES, "QueueName", "Tags"))
    required: frozenset[str] = frozenset()
    replaced_by = frozenset(("QueueName", "FifoQueue"))

    async def create(self, env: HandlerEnv, props: dict[str, Any]) -> Made:
        name = self.name_for(env, props)
        if env.sqs.queue_exists(name):
            raise ResourceFailed(
                f"Resource of type '{self.type_name}' with identifier '{name}' already exists."
            )
        url = await env.sqs.create_queue(name, _attributes(props), _tags(env, props))
        return self._made(env, name, url)

    def name_for(self, env: HandlerEnv, props: dict[str, Any]) -> str:
        """The queue's name: its QueueName, or the one generated for it."""
        if "QueueName" in props:
            return str(props["QueueName"])
        ending = ".fifo" if _is_fifo(props) else ""
        return env.physical_name(MAX_NAME_LENGTH, ending)

    async def update(
        self, env: HandlerEnv, physical_id: str, old: dict[str, Any], new: dict[str, Any]
    ) -> Made:
        before, after = _attributes(old), _attributes(new)
        changes = {k: v for k, v in after.items() if before.get(k) != v}
        for name in before:
            if name not in after:
                changes[name] = _RESET.get(name, "")
        if changes:
            await env.sqs.set_attributes(physical_id, changes)
        old_tags, new_tags = _tags(env, old), _tags(env, new)
        removed = [key for key in old_tags if key not in new_tags]
        if removed:
            await env.sqs.untag(physical_id, removed)
        added = {k: v for k, v in new_tags.items() if old_tags.get(k) != v}
        if added:
            await env.sqs.tag(physical_id, added)
        return self._made(env, physical_id.rstrip("/").rsplit("/", 1)[-1], physical_id)

    async def delete(self, env: HandlerEnv, physical_id: str, props: dict[str, Any]) -> None:
        await env.sqs.delete_queue(physical_id)

    def _made(self, env: HandlerEnv, name: str, url: str) -> Made:
        return Made(url, {"Arn": env.sqs.queue_arn(name), "QueueName": name, "QueueUrl": url})


def _is_fifo(props: dict[str, Any]) -> bool:
    return text(props.get("FifoQueue", False)).lower() == "true"


def _attributes(props: dict[str, Any]) -> dict[str, str]:
    attributes = {}
    for name in _ATTRIBUTES:
        if name not in props:
            continue
        if name == "FifoQueue" and not _is_fifo(props):
            continue  # `FifoQueue: false` is a standard queue, which has no such attribute
        attributes[name] = text(props[name])
    return attributes


def _tags(env: HandlerEnv, props: dict[str, Any]) -> dict[str, str]:
    tags = dict(env.stack_tags)
    given = props.get("Tags", [])
    if not isinstance(given, list) or not all(
        isinstance(t, dict) and "Key" in t and "Value" in t for t in given
    ):
        raise ResourceFailed("Tags must be a list of {Key, Value} objects")
    tags.update({str(t["Key"]): text(t["Value"]) for t in given})
    return tags
