"""SetQueueAttributes: validated changes, persisted in the catalog; an empty policy removes it."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import MissingParameter, QueueDoesNotExist
from gateway.sqs.queue_attributes import validate_fifo_settings, validate_settable
from gateway.sqs.queues import effective_attributes, is_fifo
from topology.catalog import QueueRecord


@dataclass(frozen=True)
class SetQueueAttributesRequest:
    queue_url: str
    attributes: dict[str, str]


def decode(p: Params) -> SetQueueAttributesRequest:
    attributes = p.str_map("Attributes")
    queue_url = p.required_str("QueueUrl")
    if not attributes:
        raise MissingParameter.named("Attributes")
    return SetQueueAttributesRequest(queue_url=queue_url, attributes=attributes)


def _merged(record: QueueRecord, changes: dict[str, str]) -> dict[str, str]:
    attributes = dict(record.attributes)
    for name, value in changes.items():
        if value == "":
            attributes.pop(name, None)
        else:
            attributes[name] = value
    return attributes


async def handle(req: SetQueueAttributesRequest, ctx: RequestContext) -> Result:
    registry = ctx.runtime.registry
    record = ctx.queue(req.queue_url)
    fifo = is_fifo(record)
    changes = validate_settable(req.attributes, fifo=fifo)
    ctx.runtime.messages.encryption.check_settable(changes)
    if fifo:
        validate_fifo_settings(
            effective_attributes(record.changed(attributes=_merged(record, changes)))
        )
    registry.validate_redrive(changes, ctx.queue_arn(record))
    updated = record.changed(
        attributes=_merged(record, changes), modified_s=ctx.runtime.clock.now_ms() // 1000
    )
    retention = "MessageRetentionPeriod"
    if updated.attributes.get(retention) != record.attributes.get(retention):
        # Kafka's retention first: a failed catalog write then leaves a retry to converge.
        await registry.apply_topic_retention(updated)
        current = registry.current(record)
        if current is None:
            raise QueueDoesNotExist()
        updated = current.changed(
            attributes=_merged(current, changes), modified_s=updated.modified_s
        )
    await registry.update(updated)
    return {}


ACTION = Action("SetQueueAttributes", decode, handle)
