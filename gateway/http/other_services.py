"""CloudFormation and STS on the SQS port: which service a request is for, and its answer.

A request signed for `cloudformation` or `sts` (its SigV4 credential scope) goes to that
service; an unsigned one goes by its Action name, which SQS's never share. CloudFormation runs
a stack's SQS work as the caller's own requests (`gateway/cloudformation/sqs_calls.py`), each
authorized here as an SQS request of the same caller would be.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aiohttp import web

from gateway.actions.context import Protocol, RequestContext
from gateway.actions.runtime import Runtime
from gateway.cloudformation import api, wire
from gateway.cloudformation.context import CallerIdentity, CfnContext
from gateway.cloudformation.errors import CloudFormationError
from gateway.cloudformation.sqs_calls import SqsCalls
from gateway.cloudformation.store import StackStore
from gateway.http import query
from gateway.http.auth import Caller, authorize, condition_keys

# The stacks, set by `gateway/app.py`.
STACKS = web.AppKey("stacks", StackStore)
CLOUDFORMATION = "cloudformation"
STS = "sts"


def service_of(caller: Caller, action: str) -> str | None:
    """ "cloudformation" or "sts" for a request to those endpoints, None for SQS."""
    if caller.service in (CLOUDFORMATION, STS):
        return caller.service
    if caller.service is None:
        if action in api.ACTIONS:
            return CLOUDFORMATION
        if action in api.STS_ACTIONS:
            return STS
    return None


class _MissingAuthentication(CloudFormationError):
    code = "MissingAuthenticationToken"
    http_status = 403

    def __init__(self) -> None:
        super().__init__("Request is missing Authentication Token")


async def answer(
    request: web.Request,
    body: bytes,
    runtime: Runtime,
    caller: Caller,
    service: str,
    request_id: str,
    now: datetime,
) -> web.Response:
    status, text = await _answer(request, body, runtime, caller, service, request_id, now)
    return web.Response(
        status=status,
        text=text,
        content_type="text/xml",
        headers={"x-amzn-RequestId": request_id},
    )


async def _answer(
    request: web.Request,
    body: bytes,
    runtime: Runtime,
    caller: Caller,
    service: str,
    request_id: str,
    now: datetime,
) -> tuple[int, str]:
    pairs = [p for p in query.parse_form(request.query_string) if not p[0].startswith("X-Amz-")]
    if request.method == "POST":
        pairs += query.parse_form(body.decode("utf-8", errors="replace"))
    params = wire.to_tree(pairs)
    action = str(params.pop("Action", ""))
    principal = caller.principal
    if principal.anonymous:
        return api.error_answer(_MissingAuthentication(), request_id, service == STS)
    settings = runtime.settings
    base_url = settings.base_url.rstrip("/") or f"{request.scheme}://{request.host}"
    region = caller.region or settings.region
    ctx = RequestContext(
        runtime=runtime,
        protocol=Protocol.QUERY,
        base_url=base_url,
        account_id=principal.account_id,
        region=region,
        sender_id=principal.access_key or principal.account_id,
        request_id=request_id,
        principal=principal,
    )
    conditions = condition_keys(request, principal, now)

    def authorize_sqs(sqs_action: str, sqs_params: dict[str, Any]) -> None:
        authorize(sqs_action, sqs_params, principal, conditions, runtime.registry, region, base_url)

    identity = CallerIdentity(
        principal.account_id,
        principal.arn,
        principal.account_id if principal.is_root else (principal.access_key or principal.arn),
    )
    cfn = CfnContext(
        request.app[STACKS],
        SqsCalls(ctx, authorize_sqs),
        region,
        identity,
        runtime.clock.now_ms,
        request_id,
    )
    if service == STS:
        return api.answer_sts(action, cfn)
    return await api.answer_cloudformation(action, params, cfn)
