"""ListDeadLetterSourceQueues: the caller's queues whose RedrivePolicy targets this queue."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.pagination import paginate
from gateway.actions.params import Params
from gateway.common import limits
from gateway.sqs.queues import parse_arn, redrive_target
from topology.catalog import QueueRecord


@dataclass(frozen=True)
class ListDeadLetterSourceQueuesRequest:
    queue_url: str
    max_results: int | None
    next_token: str | None


def decode(p: Params) -> ListDeadLetterSourceQueuesRequest:
    return ListDeadLetterSourceQueuesRequest(
        queue_url=p.required_str("QueueUrl"),
        max_results=p.int_in_range("MaxResults", 1, limits.MAX_LIST_RESULTS),
        next_token=p.optional_str("NextToken"),
    )


def _targets(source: QueueRecord, dlq: QueueRecord) -> bool:
    redrive = redrive_target(source)
    parsed = parse_arn(redrive[0]) if redrive else None
    return parsed is not None and parsed == dlq.queue_id


async def handle(req: ListDeadLetterSourceQueuesRequest, ctx: RequestContext) -> Result:
    dlq = ctx.queue(req.queue_url)
    sources = [
        r for r in ctx.runtime.registry.listed(dlq.region, ctx.account_id) if _targets(r, dlq)
    ]
    page, next_token = paginate([r.name for r in sources], req.max_results, req.next_token)
    by_name = {r.name: r for r in sources}
    # `queueUrls` (lower-case q) is the member name in the SQS API model, and it is required.
    result: Result = {"queueUrls": [ctx.queue_url(by_name[name]) for name in page]}
    if next_token:
        result["NextToken"] = next_token
    return result


ACTION = Action("ListDeadLetterSourceQueues", decode, handle)
