"""The owner's side of the internal channel between gateways (`gateway/forwarding.py`).

`POST /_kqs/internal/<operation>`: the body is JSON, signed (`X-Kqs-Signature`, HMAC-SHA256 of
operation and body under the shared receipt secret); anything unsigned or signed otherwise is
403. Each operation runs on partitions this gateway serves, through the same `MessageService`
as an SQS request (`*_here`, or `forward=False` so a request is never forwarded twice); a
partition not served here is 409, an SQS or lease-store error is answered as `{"error": ...}`
or `{"lease_error": ...}` (200) for the forwarding gateway to raise as it was raised here.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException

from gateway.errors import QueueDoesNotExist, ServiceUnavailable, SqsError
from gateway.forwarding import (
    SIGNATURE_HEADER,
    NotServedHere,
    encode_delivery,
    encode_error,
    encode_lease_error,
    signature,
)
from gateway.messages import MessageService
from gateway.queues import QueueRegistry
from lease_store.errors import LeaseError
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord
from topology.producer import ProduceFailed

log = logging.getLogger("kqs.internal")

Operation = Callable[[MessageService, QueueRecord, dict[str, Any]], Awaitable[dict[str, Any]]]
GatewayOperation = Callable[[MessageService, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _receive(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    received, moved = await messages.receive_here(
        record, [int(p) for p in body["partitions"]], int(body["max"]), int(body["visibility_ms"])
    )
    return {
        "received": [encode_delivery(r.delivery, r.receipt_handle) for r in received],
        "moved": moved,
    }


async def _wait(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    await messages.wait_here(
        record, [int(p) for p in body["partitions"]], int(body["timeout_ms"]) / 1000
    )
    return {}


async def _counts(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    counts = messages.counts_here(record, [int(p) for p in body["partitions"]])
    return {"visible": counts.visible, "in_flight": counts.in_flight, "delayed": counts.delayed}


async def _delete(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    await messages.delete(record, str(body["handle"]), forward=False)
    return {}


async def _change_visibility(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    await messages.change_visibility(
        record, str(body["handle"]), int(body["visibility_s"]), forward=False
    )
    return {}


async def _fifo_send(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    message = StoredMessage.decode(base64.b64decode(body["message"]))
    sent = await messages.fifo.send(record, message, forward=False)
    return {
        "message_id": sent.message_id,
        "sequence_number": sent.sequence_number,
        "duplicate": sent.duplicate,
    }


async def _receive_attempt(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    received = await messages.fifo.receive(
        record,
        str(body["attempt_id"]),
        int(body["max"]),
        int(body["visibility_s"]),
        int(body["wait_s"]),
        forward=False,
    )
    return {"received": [encode_delivery(r.delivery, r.receipt_handle) for r in received]}


async def _restart_attempt(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    handles = [str(handle) for handle in body["handles"]]
    return {"kept": messages.fifo.restart_here(record, handles, int(body["visibility_s"]))}


async def _purge(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    ends = {int(p): int(end) for p, end in body["ends"].items()}
    return {"dropped": await messages.purge_here(record, ends)}


async def _gauges(messages: MessageService, body: dict[str, Any]) -> dict[str, Any]:
    partitions = {str(t): [int(p) for p in ps] for t, ps in body["partitions"].items()}
    return {
        "gauges": {
            topic: parts.encode() for topic, parts in messages.gauges_here(partitions).items()
        }
    }


# Operations on one queue: the body names its topic.
OPERATIONS: dict[str, Operation] = {
    "receive": _receive,
    "wait": _wait,
    "counts": _counts,
    "delete": _delete,
    "change_visibility": _change_visibility,
    "purge": _purge,
    "fifo_send": _fifo_send,
    "receive_attempt": _receive_attempt,
    "restart_attempt": _restart_attempt,
}
# Operations on many queues at once: the body names them itself.
GATEWAY_OPERATIONS: dict[str, GatewayOperation] = {"gauges": _gauges}


def internal_handler(
    secret: bytes, parts: Callable[[web.Request], tuple[MessageService, QueueRegistry]]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler; `parts` gives the running gateway's message service and registry."""

    async def handle(request: web.Request) -> web.Response:
        operation_name = request.match_info["operation"]
        body = await request.read()
        expected = signature(secret, operation_name, body)
        if not hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, ""), expected):
            return web.json_response({"message": "not signed by a gateway"}, status=403)
        operation = OPERATIONS.get(operation_name)
        gateway_operation = GATEWAY_OPERATIONS.get(operation_name)
        if operation is None and gateway_operation is None:
            return web.json_response({"message": "unknown operation"}, status=404)
        payload = json.loads(body)
        messages, registry = parts(request)
        if gateway_operation is not None:
            return web.json_response(await gateway_operation(messages, payload))
        assert operation is not None
        try:
            record = registry.by_topic(str(payload["topic"]))
            if record is None:
                raise QueueDoesNotExist()
            return web.json_response(await operation(messages, record, payload))
        except NotServedHere as exc:
            return web.json_response({"message": f"not served here: {exc}"}, status=409)
        except SqsError as exc:
            return web.json_response(encode_error(exc))
        except LeaseError as exc:
            return web.json_response(encode_lease_error(exc))
        except (ProduceFailed, KafkaException) as exc:
            log.warning("kafka unavailable", extra={"operation": operation_name, "error": str(exc)})
            unavailable = ServiceUnavailable("The service is unavailable (Kafka did not answer).")
            return web.json_response(encode_error(unavailable))

    return handle
