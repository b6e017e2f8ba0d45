"""Reading an SQS request in either wire protocol, and writing the answer in the same one.

JSON 1.0: `POST` with `Content-Type: application/x-amz-json-1.0` and
`X-Amz-Target: AmazonSQS.<Action>`. Query: `Action=` in the query string or a form body.
Either may be sent to `/` or to a queue URL path, in which case the path names the queue.

A queue URL is an endpoint for that queue's actions only, as in SQS: a Query request there
without an `Action` is 404 `UnknownOperationException`, and the account-wide actions
(`CreateQueue`, `ListQueues`) are `InvalidAction`. A Query client that sends
`Accept: application/json` gets its errors as JSON (`{"Error": {...}, "RequestId": ...}`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import orjson
from aiohttp import web

from gateway.actions.context import Protocol
from gateway.common.errors import (
    InvalidAction,
    InvalidParameterValue,
    MissingAction,
    MissingParameter,
    SqsError,
    UnknownOperation,
)
from gateway.common.ids import new_uuid
from gateway.http import query
from lease_store.value_class import value_class

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
_TARGET_PREFIX = "AmazonSQS."
# Account-wide actions, which a queue URL is not an endpoint for (Query protocol).
_NOT_ON_QUEUE_PATH = frozenset({"CreateQueue", "ListQueues"})


@value_class
class WireRequest:
    protocol: Protocol
    action: str
    params: dict[str, Any]
    request_id: str


def new_request_id() -> str:
    return new_uuid()


def detect_protocol(request: web.Request) -> Protocol:
    content_type = request.headers.get("Content-Type", "")
    if content_type.startswith(JSON_CONTENT_TYPE) or "X-Amz-Target" in request.headers:
        return Protocol.JSON
    return Protocol.QUERY


def read_request(
    request: web.Request, protocol: Protocol, request_id: str, raw: bytes
) -> WireRequest:
    """The request in its protocol; `raw` is its body, already read."""
    if protocol is Protocol.JSON:
        target = request.headers.get("X-Amz-Target", "")
        if not target.startswith(_TARGET_PREFIX):
            raise MissingAction("The request must contain the header X-Amz-Target.")
        action = target[len(_TARGET_PREFIX) :]
        try:
            params = json.loads(raw) if raw.strip() else _presigned_json_params(request)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            raise MissingParameter("The request body is not valid JSON.") from None
        if not isinstance(params, dict):
            raise MissingParameter("The request body must be a JSON object.")
    else:
        # A presigned URL's X-Amz-* parameters are the signature, not the action's.
        flat = {
            k: v for k, v in query.parse_form(request.query_string) if not k.startswith("X-Amz-")
        }
        if request.method == "POST":
            try:
                body = raw.decode("utf-8", errors="strict")
            except UnicodeDecodeError:
                raise InvalidParameterValue("The request body is not valid UTF-8.") from None
            flat.update(query.parse_form(body))
        action = flat.pop("Action", "")
        on_queue_path = _is_queue_path(request.path)
        if not action:
            if on_queue_path:
                raise UnknownOperation()
            raise MissingAction("The request must contain the parameter Action.")
        if on_queue_path and action in _NOT_ON_QUEUE_PATH:
            raise unknown_action(action)
        params = query.to_json_shape(flat)
    if "QueueUrl" not in params and _is_queue_path(request.path):
        params["QueueUrl"] = request.path
    return WireRequest(protocol, action, params, request_id)


def write_json(document: Any) -> bytes:
    """A JSON answer body: UTF-8, characters outside ASCII as they are.

    orjson writes it: ~20× faster than `json.dumps` for a receive of ten 1 KB messages (42 →
    2 µs, which was close to a tenth of that request's CPU). What it cannot write (a lone
    surrogate, an integer past 64 bits) goes through `json.dumps`. (Requests are still read
    by the json module: orjson reads an integer past 64 bits as a float, which would change
    the error such a parameter gets.)
    """
    try:
        return orjson.dumps(document)
    except orjson.JSONEncodeError:
        return json.dumps(document).encode()


def _presigned_json_params(request: web.Request) -> dict[str, Any]:
    """A JSON request without a body: botocore's presigned URL carries its (flat) members."""
    return {k: v for k, v in request.query.items() if not k.startswith("X-Amz-")}


@lru_cache(maxsize=1024)
def _is_queue_path(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    return len(parts) == 2


def render_result(wire: WireRequest, result: dict[str, Any]) -> web.Response:
    headers = {"x-amzn-RequestId": wire.request_id}
    if wire.protocol is Protocol.JSON:
        return web.Response(
            body=write_json(result), content_type=JSON_CONTENT_TYPE, headers=headers
        )
    return web.Response(
        text=query.render_result(wire.action, result, wire.request_id),
        content_type="text/xml",
        headers=headers,
    )


def render_error(
    protocol: Protocol, error: SqsError, request_id: str, accept: str = ""
) -> web.Response:
    """The error in the request's protocol; `accept` is the request's Accept header."""
    headers = {"x-amzn-RequestId": request_id}
    fault = "Sender" if error.sender_fault else "Receiver"
    if isinstance(error, UnknownOperation) and protocol is Protocol.QUERY:
        # SQS answers exactly this: no ErrorResponse document, no message.
        return web.Response(
            status=error.http_status,
            text="<UnknownOperationException/>",
            content_type="text/xml",
            headers=headers,
        )
    if protocol is Protocol.QUERY and "application/json" in accept:
        body = {
            "Error": {
                "Type": fault,
                "Code": error.code,
                "Message": error.message_for(query=True),
            },
            "RequestId": request_id,
        }
        return web.json_response(body, status=error.http_status, headers=headers)
    if protocol is Protocol.JSON:
        headers["x-amzn-query-error"] = f"{error.code};{fault}"
        body = {"__type": f"com.amazonaws.sqs#{error.json_type}", "message": error.message}
        return web.Response(
            status=error.http_status,
            body=write_json(body),
            content_type=JSON_CONTENT_TYPE,
            headers=headers,
        )
    return web.Response(
        status=error.http_status,
        text=query.render_error(
            error.code, error.message_for(query=True), error.sender_fault, request_id
        ),
        content_type="text/xml",
        headers=headers,
    )


def unknown_action(action: str) -> InvalidAction:
    return InvalidAction(f"The action {action} is not valid for this endpoint.")
