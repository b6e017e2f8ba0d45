"""The dashboard's message list: a queue's messages, browsed through a gateway, and replays.

    GET  /messages       the administrator's page (static/messages.html): one queue's
                         messages, newest first, with their state; a DLQ's with the queue
                         each came from and a button that replays it there
    GET  /api/messages   ?account=&queue=&status=&order=&token= : PeekMessages
    POST /api/replay     {account, queue, partition, offset, destination_arn}:
                         StartMessageReplayTask of that one record into the destination

The lease state lives in the gateways, so the page asks one (`--gateway-url`) with the
credentials of the dashboard's environment (botocore's chain: an administrator's keys see
every account's queues). Looking is PeekMessages: nothing is received or deleted. The
replay re-sends the record as a new message and leaves the DLQ's copy where it is.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.session import Session

log = logging.getLogger("kqs.dashboard.messages")

TIMEOUT = aiohttp.ClientTimeout(total=30)
STATIC_DIR = Path(__file__).parent / "static"


class GatewayError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class GatewayClient:
    """SQS JSON 1.0 calls to a gateway, SigV4-signed."""

    url: str
    region: str = "us-east-1"
    credentials: Credentials | None = None

    @classmethod
    def from_environment(cls, url: str) -> GatewayClient:
        session = Session()
        found = session.get_credentials()
        region = session.get_config_variable("region") or "us-east-1"
        # A local server's habit when nothing is configured: the embedded account's keys.
        return cls(url.rstrip("/"), region, found or Credentials("test", "test"))

    def queue_url(self, account: str, queue: str) -> str:
        return f"{self.url}/{account}/{queue}"

    async def call(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"AmazonSQS.{action}",
        }
        request = AWSRequest(method="POST", url=f"{self.url}/", data=data, headers=headers)
        if self.credentials is not None:
            SigV4Auth(self.credentials.get_frozen_credentials(), "sqs", self.region).add_auth(
                request
            )
        async with (
            aiohttp.ClientSession(timeout=TIMEOUT) as session,
            session.post(
                f"{self.url}/", data=data, headers=dict(request.prepare().headers)
            ) as response,
        ):
            answer: dict[str, Any] = await response.json(content_type=None)
            if response.status >= 300:
                code = str(answer.get("__type", "Error")).rsplit("#", 1)[-1]
                raise GatewayError(response.status, code, str(answer.get("message", "")))
            return answer


GATEWAY_KEY = web.AppKey("gateway", GatewayClient)


def _gateway(request: web.Request) -> GatewayClient:
    gateway = request.app.get(GATEWAY_KEY)
    if gateway is None:
        raise web.HTTPServiceUnavailable(
            text=json.dumps({"error": "no gateway configured: kqs dashboard --gateway-url URL"}),
            content_type="application/json",
        )
    return gateway


def _answer_error(error: GatewayError | aiohttp.ClientError) -> web.Response:
    if isinstance(error, GatewayError):
        payload = {"error": f"{error.code}: {error.message}"}
        return web.json_response(payload, status=502 if error.status >= 500 else 400)
    return web.json_response({"error": f"gateway unreachable: {error}"}, status=502)


async def _page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "messages.html", headers={"Cache-Control": "no-cache"})


async def _messages(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    query = request.query
    account, queue = query.get("account", ""), query.get("queue", "")
    if not account or not queue:
        return web.json_response({"error": "account and queue are required"}, status=400)
    body: dict[str, Any] = {
        "QueueUrl": gateway.queue_url(account, queue),
        "MaxNumberOfMessages": 50,
        "Order": query.get("order", "newest"),
        "BodyPreviewLength": 200,
    }
    if query.get("status"):
        body["Statuses"] = [query["status"]]
    if query.get("token"):
        body["NextToken"] = query["token"]
    try:
        page = await gateway.call("PeekMessages", body)
    except (GatewayError, aiohttp.ClientError) as error:
        return _answer_error(error)
    return web.json_response(
        {
            "queue": queue,
            "account": account,
            "queue_url": body["QueueUrl"],
            "messages": page.get("Messages", []),
            "next_token": page.get("NextToken"),
            "oldest_available_ms": page.get("OldestAvailableTimestamp"),
            "retention_s": page.get("MessageRetentionPeriod"),
            "topic_retention_ms": page.get("TopicRetentionMs"),
        },
        headers={"Cache-Control": "no-store"},
    )


def _queue_url_of_arn(gateway: GatewayClient, arn: str) -> str | None:
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs":
        return None
    return gateway.queue_url(parts[4], parts[5])


async def _replay(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    try:
        wanted = await request.json()
        partition, offset = int(wanted["partition"]), int(wanted["offset"])
        source = gateway.queue_url(str(wanted["account"]), str(wanted["queue"]))
        destination = _queue_url_of_arn(gateway, str(wanted["destination_arn"]))
    except (ValueError, KeyError, TypeError):
        return web.json_response(
            {"error": "partition, offset, account, queue, destination_arn are required"}, status=400
        )
    if destination is None:
        return web.json_response({"error": "destination_arn is not a queue ARN"}, status=400)
    try:
        started = await gateway.call(
            "StartMessageReplayTask",
            {
                "QueueUrl": source,
                "StartOffsets": {str(partition): str(offset)},
                "EndOffsets": {str(partition): str(offset + 1)},
                "DestinationQueueUrl": destination,
            },
        )
    except (GatewayError, aiohttp.ClientError) as error:
        return _answer_error(error)
    log.info("message replayed from the dashboard", extra={"source": source, "offset": offset})
    return web.json_response({"task_handle": started["TaskHandle"], "destination": destination})


def add_message_routes(app: web.Application, gateway: GatewayClient | None) -> None:
    if gateway is not None:
        app[GATEWAY_KEY] = gateway
    app.router.add_get("/messages", _page)
    app.router.add_get("/api/messages", _messages)
    app.router.add_post("/api/replay", _replay)
