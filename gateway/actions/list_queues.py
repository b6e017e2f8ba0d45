"""ListQueues of the request's region: name-prefix filter; pages of MaxResults with NextToken."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.pagination import paginate
from gateway.actions.params import Params
from gateway.common import limits


@dataclass(frozen=True)
class ListQueuesRequest:
    queue_name_prefix: str
    max_results: int | None
    next_token: str | None


def decode(p: Params) -> ListQueuesRequest:
    return ListQueuesRequest(
        queue_name_prefix=p.optional_str("QueueNamePrefix") or "",
        max_results=p.int_in_range("MaxResults", 1, limits.MAX_LIST_RESULTS),
        next_token=p.optional_str("NextToken"),
    )


async def handle(req: ListQueuesRequest, ctx: RequestContext) -> Result:
    registry = ctx.runtime.registry
    if ctx.is_admin:  # an administrator lists every account's queues, by account then name
        records = [
            r
            for r in registry.all_active()
            if r.region == ctx.region and r.name.startswith(req.queue_name_prefix)
        ]
        by_key = {f"{r.account_id}/{r.name}": r for r in records}
    else:
        records = registry.listed(ctx.region, ctx.account_id, req.queue_name_prefix)
        by_key = {r.name: r for r in records}
    page, next_token = paginate(sorted(by_key), req.max_results, req.next_token)
    result: Result = {}
    if page:
        result["QueueUrls"] = [ctx.queue_url(by_key[key]) for key in page]
    if next_token:
        result["NextToken"] = next_token
    return result


ACTION = Action("ListQueues", decode, handle)
