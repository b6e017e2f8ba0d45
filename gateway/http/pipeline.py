"""The request pipeline: every SQS request from arrival to answer (read, authenticate, decode,
authorize, run the action, render the result or the SQS error), `/health` and `/metrics`,
the routes on aiohttp's front and the lean one, and a graceful shutdown's drain.

`gateway/app.py` builds the parts this reads through the application's keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

from aiohttp import ClientPayloadError, web
from confluent_kafka import KafkaException

from gateway.actions.context import Protocol, RequestContext, RequestNotes
from gateway.actions.params import Params
from gateway.actions.runtime import Runtime
from gateway.cluster.forwarding import PATH as INTERNAL_PATH
from gateway.common import limits
from gateway.common.denials import missing_acl
from gateway.common.errors import (
    InternalError,
    RequestTooLarge,
    ServiceUnavailable,
    SqsError,
    for_domain_error,
)
from gateway.http import other_services
from gateway.http.auth import authenticate, authorize, condition_keys
from gateway.http.dispatch import ACTIONS
from gateway.http.lean_http import Handler, LeanFront, LeanRequest
from gateway.http.protocol import (
    detect_protocol,
    new_request_id,
    read_request,
    render_error,
    render_result,
    unknown_action,
)
from gateway.iam.config import Directory
from gateway.observability.metrics import CONTENT_TYPE, GatewayMetrics, RequestMetrics, Snapshot
from gateway.sqs.waiters import QueueSignals
from lease_store.errors import LeaseError
from lease_store.value_class import value_class
from topology.producer import ProduceFailed

log = logging.getLogger("kqs.gateway")

# What the pipeline reads from the application, set by `gateway/app.py`.
RUNTIME = web.AppKey("runtime", Runtime)
SIGNALS = web.AppKey("signals", QueueSignals)
DIRECTORY = web.AppKey("directory", Directory)
# The gateway's `/metrics` (its own registry), and its request metrics, which every request
# moves (`_handle`).
METRICS = web.AppKey("metrics", GatewayMetrics)
REQUEST_METRICS = web.AppKey("request_metrics", RequestMetrics)
INTERNAL_HANDLER: web.AppKey[Handler] = web.AppKey("internal_handler")
# What `/metrics` reads besides the request metrics, and whether the gateway is still joining
# its ingest group (group mode): set by `gateway/app.py` once the gateway has started.
SNAPSHOT: web.AppKey[Callable[[], Snapshot]] = web.AppKey("snapshot")
JOINING: web.AppKey[Callable[[], bool]] = web.AppKey("joining")


def lean_front(app: web.Application) -> LeanFront:
    """The lean HTTP front (`KQS_HTTP_FRONT=lean`) over this application's handlers, routed
    as `build_app` routes them."""
    routes = {("GET", path): handler for path, handler in _GET_ROUTES.items()}

    def client_gone(request: LeanRequest) -> None:
        # As `_answer` reports a body aiohttp could not read to the end.
        log.info("client disconnected mid-request", extra={"request_id": new_request_id()})
        protocol = detect_protocol(cast(web.Request, request))
        app[REQUEST_METRICS].observe("unknown", protocol.value, _CLIENT_GONE.code, 0.0, False)

    front = LeanFront(
        app,
        routes,
        INTERNAL_PATH,
        app[INTERNAL_HANDLER],
        _handle,
        limits.MAX_REQUEST_BYTES,  # as `client_max_size` of aiohttp's front
        app[IN_FLIGHT],
        client_gone,
    )
    if SETTLE_DELIVERED in app:  # the gateway has started (the front is made after that)
        front.settle_delivered = app[SETTLE_DELIVERED]
        messages = app[RUNTIME].messages
        front.deletes_now = lambda: messages.deletes_find_more
    return front


def runtime_of(request: web.Request) -> Runtime:
    return request.app[RUNTIME]


def serve_sqs(app: web.Application, internal: Handler) -> None:
    """Route every path of `app` through the pipeline: `/health`, `/metrics`, the peer API
    of the other gateways (`internal`) and SQS on any other path."""
    app[IN_FLIGHT] = InFlight()
    # The snapshot is read when scraped, from the key `gateway/app.py` sets once started.
    metrics = GatewayMetrics(lambda: app[SNAPSHOT]())
    app[METRICS] = metrics
    app[REQUEST_METRICS] = metrics.requests
    app.on_shutdown.append(_answer_long_polls)
    # Before the catch-all: SQS is served on any path.
    for path, handler in _GET_ROUTES.items():
        app.router.add_get(path, handler)
    app[INTERNAL_HANDLER] = internal
    app.router.add_post(f"{INTERNAL_PATH}{{operation}}", internal)
    app.router.add_route("*", "/{tail:.*}", _handle)


async def _answer_long_polls(app: web.Application) -> None:
    # Runs before the server waits for in-flight requests: parked receives answer at once
    # (empty) instead of holding shutdown for up to 20 s.
    if SIGNALS in app:
        app[SIGNALS].close()


class InFlight:
    """The requests being handled, so that a shutdown can wait for them (`drain`)."""

    def __init__(self) -> None:
        self.count = 0
        self.draining = False
        self.idle = asyncio.Event()
        self.idle.set()


IN_FLIGHT = web.AppKey("in_flight", InFlight)


# The producer's `settle_handed`, for the lean front to call before each read (`lean_front`).
SETTLE_DELIVERED: web.AppKey[Callable[[], object]] = web.AppKey("settle_delivered")


async def drain(app: web.Application, timeout_s: float) -> int:
    """First step of a graceful shutdown, once the listening socket is closed.

    Parked long polls answer at once (empty) and the requests being handled finish, on
    connections that stay open meanwhile. Only then may the server close its connections:
    aiohttp's own shutdown drops whatever a connection receives once it is closing, so a
    request whose body was still arriving would hang until the shutdown timeout, unanswered.
    Returns how many requests were still running when `timeout_s` passed.
    """
    tracker = app[IN_FLIGHT]
    tracker.draining = True
    await _answer_long_polls(app)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(tracker.idle.wait(), timeout_s)
    return tracker.count


async def _health(request: web.Request) -> web.Response:
    if request.app[IN_FLIGHT].draining:
        return web.json_response({"status": "shutting down"}, status=503)
    if JOINING in request.app and request.app[JOINING]():
        # Group mode: it would answer (forwarding everything) but is not a member yet.
        return web.json_response({"status": "joining the ingest group"}, status=503)
    return web.json_response({"status": "ok"})


async def _metrics(request: web.Request) -> web.Response:
    if "Action" in request.query:
        return await _handle(request)  # a Query-protocol GET that happens to use this path
    return web.Response(
        body=request.app[METRICS].exposition(), headers={"Content-Type": CONTENT_TYPE}
    )


# The paths served apart from the SQS endpoint and the internal channel, on either front.
_GET_ROUTES: dict[str, Handler] = {"/health": _health, "/metrics": _metrics}


async def _handle(request: web.Request) -> web.Response:
    started = time.perf_counter()
    app = request.app
    # Counted here rather than in a middleware (one coroutine less per request): a shutdown
    # waits for these (`drain`).
    tracker = app[IN_FLIGHT]
    tracker.count += 1
    tracker.idle.clear()
    try:
        protocol = detect_protocol(request)
        notes = RequestNotes()
        answer = await _answer(request, app, protocol, notes)
        app[REQUEST_METRICS].observe(
            answer.action,
            protocol.value,
            answer.outcome,
            time.perf_counter() - started,
            notes.long_poll,
        )
        if tracker.draining:
            answer.response.force_close()  # no keep-alive: the next request goes elsewhere
        return answer.response
    finally:
        tracker.count -= 1
        if tracker.count == 0:
            tracker.idle.set()


@value_class
class _Answer:
    response: web.Response
    action: str  # "unknown" unless the request named an action this gateway serves
    outcome: str  # "ok" or the SQS error code


async def _answer(
    request: web.Request, app: web.Application, protocol: Protocol, notes: RequestNotes
) -> _Answer:
    runtime = app[RUNTIME]
    request_id = new_request_id()
    action_name = "unknown"
    error: SqsError
    try:
        body = await _read_body(request)
        now = datetime.fromtimestamp(runtime.clock.now_ms() / 1000, UTC)
        caller = authenticate(request, body, app[DIRECTORY], now)
        wire = read_request(request, protocol, request_id, body)
        service = other_services.service_of(caller, wire.action)
        if service is not None:
            response = await other_services.answer(
                request, body, runtime, caller, service, request_id, now
            )
            outcome = "ok" if response.status < 400 else "error"
            return _Answer(response, f"{service}:{wire.action}", outcome)
        action = ACTIONS.get(wire.action)
        if action is None:
            raise unknown_action(wire.action)
        action_name = wire.action
        settings = runtime.settings
        base_url = settings.base_url.rstrip("/") or f"{request.scheme}://{request.host}"
        region = caller.region or settings.region
        principal = caller.principal
        authorize(
            wire.action,
            wire.params,
            principal,
            condition_keys(request, principal, now),
            runtime.registry,
            region,
            base_url,
        )
        ctx = RequestContext(
            runtime=runtime,
            protocol=protocol,
            base_url=base_url,
            account_id=principal.account_id,
            region=region,
            sender_id=principal.access_key or principal.account_id,
            request_id=request_id,
            trace_header=request.headers.get("X-Amzn-Trace-Id"),
            notes=notes,
            principal=principal,
        )
        result = await action(Params(wire.params), ctx)
        return _Answer(render_result(wire, result), action_name, "ok")
    except SqsError as exc:
        error = exc
    except LeaseError as exc:
        error = for_domain_error(exc)
    except (ProduceFailed, KafkaException) as exc:
        missing = missing_acl(exc, action_name)
        if missing is not None:  # a deployment's mistake, not an outage: say what to grant
            log.error(
                "Kafka refused the gateway: missing ACL",
                extra={"request_id": request_id, "acl": missing, "error": str(exc)},
            )
            error = InternalError(f"Kafka refused the gateway's request: grant it {missing}.")
        else:
            log.warning("kafka unavailable", extra={"request_id": request_id, "error": str(exc)})
            error = ServiceUnavailable(
                "The service is unavailable (Kafka did not answer). Retry later."
            )
    except _ClientGone:
        # Nobody will read an answer; not the gateway's fault, so no traceback either.
        log.info("client disconnected mid-request", extra={"request_id": request_id})
        error = _CLIENT_GONE
    except Exception:
        log.exception("request failed", extra={"request_id": request_id})
        error = InternalError("We encountered an internal error. Please try again.")
    response = render_error(protocol, error, request_id, request.headers.get("Accept", ""))
    if isinstance(error, RequestTooLarge):
        response.force_close()  # the rest of the body is not worth reading
    return _Answer(response, action_name, error.code)


class _ClientGone(Exception):
    """The client closed its connection before its request body arrived."""


class _ClientClosedRequest(SqsError):
    code = "ClientClosedRequest"  # an outcome label for /metrics; never reaches a client
    http_status = 400
    sender_fault = True


_CLIENT_GONE = _ClientClosedRequest("The client closed the connection.")


async def _read_body(request: web.Request) -> bytes:
    """The whole request body, or the SQS error for a body that is too large."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RequestTooLarge(
            f"The request body is larger than the {limits.MAX_REQUEST_BYTES} bytes this "
            "server accepts."
        ) from None
    except (ConnectionResetError, ClientPayloadError) as exc:
        raise _ClientGone() from exc
