"""StartMessageReplayTask (KQS's own): re-send what a queue's log holds in a range.

The range is `SinceTimestamp` (with an optional `UntilTimestamp`), epoch milliseconds as
SQS writes timestamps, or `StartOffsets` (with optional `EndOffsets`): Kafka offsets per
partition of the queue's topic, as a map from partition number to offset. The messages go to
`DestinationQueueUrl`, else back to the source queue. The task is `gateway/sqs/replay/
tasks.py`; the caller needs this action on the source and SendMessage on the destination.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.common.errors import InvalidParameterValue, MissingParameter
from gateway.sqs.replay.tasks import MAX_RATE, ReplayRequest


@dataclass(frozen=True)
class StartMessageReplayTaskRequest:
    queue_url: str
    destination_queue_url: str | None
    since_timestamp: int | None
    until_timestamp: int | None
    start_offsets: dict[int, int] | None
    end_offsets: dict[int, int] | None
    max_number_of_messages_per_second: int | None


def _offsets(p: Params, name: str) -> dict[int, int] | None:
    raw = p.str_map(name) if name in p else {}
    if not raw:
        return None
    try:
        offsets = {int(k): int(v) for k, v in raw.items()}
    except ValueError:
        raise InvalidParameterValue(
            f"Value for parameter {name} is invalid. Reason: a map of partition numbers to "
            "offsets, both integers."
        ) from None
    if any(k < 0 or v < 0 for k, v in offsets.items()):
        raise InvalidParameterValue(f"Value for parameter {name} is invalid. Reason: negative.")
    return offsets


def decode(p: Params) -> StartMessageReplayTaskRequest:
    req = StartMessageReplayTaskRequest(
        queue_url=p.required_str("QueueUrl"),
        destination_queue_url=p.optional_str("DestinationQueueUrl") or None,
        since_timestamp=p.optional_int("SinceTimestamp"),
        until_timestamp=p.optional_int("UntilTimestamp"),
        start_offsets=_offsets(p, "StartOffsets"),
        end_offsets=_offsets(p, "EndOffsets"),
        max_number_of_messages_per_second=p.int_in_range(
            "MaxNumberOfMessagesPerSecond", 1, MAX_RATE
        ),
    )
    if (req.since_timestamp is None) == (req.start_offsets is None):
        if req.since_timestamp is None:
            raise MissingParameter.named("SinceTimestamp")
        raise InvalidParameterValue("Give either SinceTimestamp or StartOffsets, not both.")
    if req.until_timestamp is not None and req.since_timestamp is None:
        raise InvalidParameterValue("UntilTimestamp goes with SinceTimestamp.")
    if req.end_offsets is not None and req.start_offsets is None:
        raise InvalidParameterValue("EndOffsets go with StartOffsets.")
    if (
        req.until_timestamp is not None
        and req.since_timestamp is not None
        and req.until_timestamp < req.since_timestamp
    ):
        raise InvalidParameterValue("UntilTimestamp is before SinceTimestamp.")
    return req


async def handle(req: StartMessageReplayTaskRequest, ctx: RequestContext) -> Result:
    source = ctx.queue(req.queue_url)
    destination = source
    if req.destination_queue_url is not None:
        destination = ctx.queue(req.destination_queue_url)
    task_handle, to_replay = await ctx.runtime.replay_tasks.start(
        ReplayRequest(
            source=source,
            destination=destination,
            since_ms=req.since_timestamp,
            until_ms=req.until_timestamp,
            start_offsets=req.start_offsets,
            end_offsets=req.end_offsets,
            max_per_second=req.max_number_of_messages_per_second,
        )
    )
    return {"TaskHandle": task_handle, "ApproximateNumberOfMessagesToReplay": to_replay}


ACTION = Action("StartMessageReplayTask", decode, handle)
