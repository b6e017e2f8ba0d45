"""The owner's side of the internal channel between gateways (`gateway/cluster/forwarding.py`).

`POST /_kqs/internal/<operation>`: the body is JSON, signed (`X-Kqs-Signature`, HMAC-SHA256 of
operation and body under the shared receipt secret); anything unsigned or signed otherwise is
403. Each operation runs on partitions this gateway serves, through the same `MessageService`
or `MoveTasks` as an SQS request (`*_here`, or `forward=False` so a request is never
forwarded twice; a move task's Start, List and Cancel need the source queue's partition 0,
which makes this gateway its tasks' home); a partition not served here is 409, an SQS or
lease-store error is answered as `{"error": ...}` or `{"lease_error": ...}` (200) for the
forwarding gateway to raise as it was raised here.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException

from gateway.actions.runtime import Runtime
from gateway.cluster.forwarding import (
    SIGNATURE_HEADER,
    NotServedHere,
    encode_error,
    encode_held,
    encode_lease_error,
    encode_received,
    signature,
)
from gateway.common.errors import QueueDoesNotExist, ServiceUnavailable, SqsError
from gateway.sqs.fifo import FifoService
from gateway.sqs.messages.service import MessageService
from gateway.sqs.move_tasks import MoveTasks
from lease_store.errors import LeaseError
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord, partition_keys
from topology.producer import ProduceFailed

log = logging.getLogger("kqs.internal")

Answer = Awaitable[dict[str, Any]]
Operation = Callable[[MessageService, QueueRecord, dict[str, Any]], Answer]
FifoOperation = Callable[[FifoService, QueueRecord, dict[str, Any]], Answer]
MoveTaskOperation = Callable[[MoveTasks, QueueRecord, dict[str, Any]], Answer]
GatewayOperation = Callable[[MessageService, dict[str, Any]], Answer]


async def _receive(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    received, moved = await messages.receive_here(
        record, [int(p) for p in body["partitions"]], int(body["max"]), int(body["visibility_ms"])
    )
    return {
        "received": [encode_received(r.delivery, r.receipt_handle) for r in received],
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


async def _lease_facts(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    wanted = {int(p): [int(o) for o in offsets] for p, offsets in body["wanted"].items()}
    found = messages.lease_facts_here(record, wanted)
    return {"partitions": {str(p): facts.encode() for p, facts in found.items()}}


async def _delete(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    return {"removed": await messages.delete_here(record, str(body["handle"]))}


async def _change_visibility(
    messages: MessageService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    await messages.change_visibility(
        record, str(body["handle"]), int(body["visibility_s"]), forward=False
    )
    return {}


async def _fifo_send(
    fifo: FifoService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    message = StoredMessage.decode(base64.b64decode(body["message"]))
    sent = await fifo.send(record, message, forward=False, claimed=bool(body.get("claimed")))
    return {
        "message_id": sent.message_id,
        "sequence_number": sent.sequence_number,
        "duplicate": sent.duplicate,
    }


async def _fifo_entry(
    fifo: FifoService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    entry = fifo.entry_here(record, int(body["partition"]), bytes.fromhex(str(body["key"])))
    if entry is None:
        return {"entry": None}
    return {
        "entry": {"sent_ms": entry.sent_ms, "offset": entry.offset, "message_id": entry.message_id}
    }


async def _receive_attempt(
    fifo: FifoService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    received = await fifo.receive(
        record,
        str(body["attempt_id"]),
        int(body["max"]),
        int(body["visibility_s"]),
        int(body["wait_s"]),
        forward=False,
    )
    return {"received": [encode_received(r.delivery, r.receipt_handle) for r in received]}


async def _restart_attempt(
    fifo: FifoService, record: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    handles = [str(handle) for handle in body["handles"]]
    return {"kept": fifo.restart_here(record, handles, int(body["visibility_s"]))}


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


async def _move_task_start(
    tasks: MoveTasks, source: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    rate = body.get("max_per_second")
    handle = await tasks.start(
        source,
        str(body["source_arn"]),
        None if body.get("destination_arn") is None else str(body["destination_arn"]),
        None if rate is None else int(rate),
        forward=False,
    )
    return {"handle": handle}


async def _move_task_list(
    tasks: MoveTasks, source: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    found = await tasks.summaries(source, int(body["max"]), forward=False)
    return {"tasks": [summary.encode() for summary in found]}


async def _move_task_cancel(
    tasks: MoveTasks, source: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    return {"moved": await tasks.cancel(source, str(body["task_id"]), forward=False)}


async def _move_hold(tasks: MoveTasks, source: QueueRecord, body: dict[str, Any]) -> dict[str, Any]:
    held = tasks.hold_here(source, [int(p) for p in body["partitions"]], int(body["max"]))
    return {"held": [encode_held(pk.partition, delivery) for pk, delivery in held]}


async def _move_remove(
    tasks: MoveTasks, source: QueueRecord, body: dict[str, Any]
) -> dict[str, Any]:
    partition = int(body["partition"])
    if not 0 <= partition < source.partitions:
        raise NotServedHere(f"{source.topic}/{partition}")
    await tasks.remove(
        source, partition_keys(source)[partition], int(body["offset"]), forward=False
    )
    return {}


# Operations on one queue: the body names its topic.
OPERATIONS: dict[str, Operation] = {
    "receive": _receive,
    "wait": _wait,
    "counts": _counts,
    "lease_facts": _lease_facts,
    "delete": _delete,
    "change_visibility": _change_visibility,
    "purge": _purge,
}
# Operations of FIFO queues on one queue: deduplicated sends and receive attempts.
FIFO_OPERATIONS: dict[str, FifoOperation] = {
    "fifo_send": _fifo_send,
    "fifo_entry": _fifo_entry,
    "receive_attempt": _receive_attempt,
    "restart_attempt": _restart_attempt,
}
# Operations of message move tasks on one source queue: the body names its topic.
MOVE_TASK_OPERATIONS: dict[str, MoveTaskOperation] = {
    "move_task_start": _move_task_start,
    "move_task_list": _move_task_list,
    "move_task_cancel": _move_task_cancel,
    "move_hold": _move_hold,
    "move_remove": _move_remove,
}
# Operations on many queues at once: the body names them itself.
GATEWAY_OPERATIONS: dict[str, GatewayOperation] = {"gauges": _gauges}


def _on_one_queue(
    name: str, runtime: Runtime
) -> Callable[[QueueRecord, dict[str, Any]], Answer] | None:
    """The operation `name` on one queue, bound to the part of the gateway it runs on."""
    if (operation := OPERATIONS.get(name)) is not None:
        return partial(operation, runtime.messages)
    if (fifo_operation := FIFO_OPERATIONS.get(name)) is not None:
        return partial(fifo_operation, runtime.fifo)
    if (task_operation := MOVE_TASK_OPERATIONS.get(name)) is not None:
        return partial(task_operation, runtime.move_tasks)
    return None


def internal_handler(
    secret: bytes, runtime_of: Callable[[web.Request], Runtime]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler; `runtime_of` gives the running gateway's parts."""

    async def handle(request: web.Request) -> web.Response:
        operation_name = request.match_info["operation"]
        body = await request.read()
        expected = signature(secret, operation_name, body)
        if not hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, ""), expected):
            return web.json_response({"message": "not signed by a gateway"}, status=403)
        runtime = runtime_of(request)
        operation = _on_one_queue(operation_name, runtime)
        gateway_operation = GATEWAY_OPERATIONS.get(operation_name)
        if operation is None and gateway_operation is None:
            return web.json_response({"message": "unknown operation"}, status=404)
        payload = json.loads(body)
        if gateway_operation is not None:
            return web.json_response(await gateway_operation(runtime.messages, payload))
        assert operation is not None
        try:
            record = runtime.registry.by_topic(str(payload["topic"]))
            if record is None:
                raise QueueDoesNotExist()
            return web.json_response(await operation(record, payload))
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
