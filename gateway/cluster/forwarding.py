"""The internal channel between gateways: what needs a partition's owner is asked of it.

`POST <owner endpoint>/_kqs/internal/<operation>` with a JSON body, signed with an HMAC-SHA256
of the operation and body under the receipt secret every gateway of a deployment shares
(`gateway/http/peer_api.py` serves it). Operations work on the partitions the owner serves
and reuse its message path (`MessageService.*_here`); an owner asked about a partition it does
not serve answers 409, and that or an owner that cannot be reached is `OwnerGone`, a retryable
`ServiceUnavailable` (deletes, visibility changes and FIFO sends try once more where the
partition's next owner serves it). SQS errors and lease-store errors of the owner (a message not available,
a visibility too long) travel back by class name and message, and are raised here as they
were there, so the action that forwarded answers exactly as if the partition were local.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import ssl
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

import aiohttp

from gateway.common import errors
from gateway.common.errors import OwnerGone, ServiceUnavailable, SqsError
from gateway.common.results import FifoSent, LeaseFacts, QueueGaugeParts, Received
from lease_store.errors import LeaseError
from lease_store.fifo import DedupEntry
from lease_store.keys import PartitionKey
from lease_store.records import LeaseFact, StoredMessage
from lease_store.types import Counts, Delivery
from topology.owners import Owner

log = logging.getLogger("kqs.forwarding")

PATH = "/_kqs/internal/"
SIGNATURE_HEADER = "X-Kqs-Signature"
# Every call but a wait: the owner answers from its lease store (a send to a dead-letter
# queue at most, bounded by the producer's 15 s delivery timeout).
CALL_TIMEOUT_S = 20.0
# A receive forwarded to the owner of other partitions: an owner that does not answer in
# this time (stopped, or hanging) gives nothing, as a partition nobody serves, instead of
# holding every receive that reached another gateway for CALL_TIMEOUT_S (measured with the
# owner SIGSTOPped: 20 s). An owner answers from memory and one RocksDB write; one that
# answers later has leased messages nobody got, which come back after their visibility
# timeout, as at-least-once allows.
RECEIVE_CALL_TIMEOUT_S = 5.0


def signature(secret: bytes, operation: str, body: bytes) -> str:
    return hmac.new(secret, operation.encode() + b"\n" + body, hashlib.sha256).hexdigest()


class NotServedHere(Exception):
    """An internal request named a partition this gateway does not serve (now)."""


def encode_delivery(delivery: Delivery) -> dict[str, Any]:
    return {
        "offset": delivery.offset,
        "fact": base64.b64encode(delivery.fact.encode()).decode(),
        "message": base64.b64encode(delivery.message.encode()).decode(),
    }


def decode_delivery(raw: dict[str, Any]) -> Delivery:
    return Delivery(
        int(raw["offset"]),
        LeaseFact.decode(base64.b64decode(raw["fact"])),
        StoredMessage.decode(base64.b64decode(raw["message"])),
    )


def encode_received(delivery: Delivery, receipt_handle: str) -> dict[str, Any]:
    return {**encode_delivery(delivery), "handle": receipt_handle}


def decode_received(raw: dict[str, Any]) -> Received:
    return Received(decode_delivery(raw), str(raw["handle"]))


def encode_held(partition: int, delivery: Delivery) -> dict[str, Any]:
    """A message a move task holds (`hold`): no receipt handle, the partition instead."""
    return {**encode_delivery(delivery), "partition": partition}


def decode_held(raw: dict[str, Any]) -> tuple[int, Delivery]:
    return int(raw["partition"]), decode_delivery(raw)


def encode_error(error: SqsError) -> dict[str, Any]:
    encoded = {"class": type(error).__name__, "message": error.message}
    if isinstance(error, OwnerGone) and error.removed:
        encoded["removed"] = error.removed
    return {"error": encoded}


def encode_lease_error(error: LeaseError) -> dict[str, Any]:
    """A lease-store error of the owner, sent as it is: the forwarding gateway's action maps
    it to its SQS error, with the request's own details (the receipt handle in the text)."""
    return {"lease_error": {"class": type(error).__name__, "args": [str(a) for a in error.args]}}


E = TypeVar("E", bound=Exception)


def _subclasses(base: type[E]) -> dict[str, type[E]]:
    found: dict[str, type[E]] = {}
    pending: list[type[E]] = [base]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def decode_error(raw: dict[str, Any]) -> SqsError:
    cls = _subclasses(SqsError).get(str(raw.get("class")), errors.InternalError)
    error = cls.__new__(cls)  # constructors differ; every SqsError is its message
    SqsError.__init__(error, str(raw.get("message", "")))
    if isinstance(error, OwnerGone) and raw.get("removed"):
        error.removed = str(raw["removed"])
    return error


def decode_lease_error(raw: dict[str, Any]) -> LeaseError:
    cls = _subclasses(LeaseError).get(str(raw.get("class")), LeaseError)
    return cls(*[str(a) for a in raw.get("args", [])])


def _gone(owner: Owner, why: str = "") -> OwnerGone:
    return OwnerGone(
        f"The gateway serving this queue partition could not be reached{why}. Retry later.",
        owner,
    )


def untrusted_peer(owner: Owner, error: aiohttp.ClientConnectorCertificateError) -> OwnerGone:
    """The other gateway answered HTTPS with a certificate this one does not trust (or that
    does not name the host of its advertised URL): a configuration error, which no retry
    mends, so it is logged as one, with what to change; the client gets the reason too."""
    cause = error.certificate_error
    reason = str(getattr(cause, "verify_message", "") or cause)
    log.error(
        "the other gateway's HTTPS certificate is not trusted: give every gateway a "
        "certificate for the host of its advertised URL (KQS_ADVERTISED_URL) signed by a CA "
        "the others trust (the system's, --tls-peer-ca / KQS_TLS_PEER_CA, or a shared --tls-cert)",
        extra={"endpoint": owner.endpoint, "reason": reason},
    )
    return _gone(owner, f" (its HTTPS certificate is not trusted here: {reason})")


class Forwarder:
    """The client side: one aiohttp session, opened on first use."""

    def __init__(self, secret: bytes, tls: ssl.SSLContext | None = None) -> None:
        self._secret = secret
        self._session: aiohttp.ClientSession | None = None
        self._tls = tls  # how to verify the other gateways over HTTPS (gateway/http/tls.py)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(
        self,
        owner: Owner,
        operation: str,
        payload: dict[str, Any],
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls) if self._tls else None
            )
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self._secret, operation, body),
        }
        try:
            async with self._session.post(
                f"{owner.endpoint.rstrip('/')}{PATH}{operation}",
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                if response.status == 409:
                    # A rebalance moved the partition: a retry finds the new owner.
                    log.info(
                        "owner no longer serves the partition",
                        extra={
                            "endpoint": owner.endpoint,
                            "operation": operation,
                            "topic": payload.get("topic"),
                        },
                    )
                    raise _gone(owner)
                answer: dict[str, Any] = await response.json()
        except aiohttp.ClientConnectorCertificateError as exc:
            raise untrusted_peer(owner, exc) from exc
        except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
            log.warning(
                "owner not reached",
                extra={
                    "endpoint": owner.endpoint,
                    "operation": operation,
                    "topic": payload.get("topic"),
                    "error": str(exc),
                },
            )
            raise _gone(owner) from exc
        if "error" in answer:
            error = decode_error(answer["error"])
            if isinstance(error, OwnerGone):
                # The partition moved away from that owner while it made the change: the
                # retry avoids that owner (the decoded error keeps `removed`).
                error.owner = owner
            raise error
        if "lease_error" in answer:
            raise decode_lease_error(answer["lease_error"])
        return answer

    # -- the operations --------------------------------------------------------------------

    async def receive(
        self,
        owners: dict[Owner, list[PartitionKey]],
        topic: str,
        wanted: int,
        visibility_ms: int,
    ) -> tuple[list[Received], int]:
        """Lease up to `wanted` messages from the owners' partitions, one owner after another
        until enough; returns them and how many went to a dead-letter queue."""
        received: list[Received] = []
        moved = 0
        for owner, pks in owners.items():
            if len(received) >= wanted:
                break
            try:
                answer = await self.call(
                    owner,
                    "receive",
                    {
                        "topic": topic,
                        "partitions": [pk.partition for pk in pks],
                        "max": wanted - len(received),
                        "visibility_ms": visibility_ms,
                    },
                    timeout_s=RECEIVE_CALL_TIMEOUT_S,
                )
            except ServiceUnavailable:
                # Moving to another gateway, or its gateway is gone: nothing is receivable
                # there now, as for a partition nobody serves; the others still answer.
                continue
            received += [decode_received(raw) for raw in answer["received"]]
            moved += int(answer["moved"])
        return received, moved

    async def receive_attempt(
        self,
        owner: Owner,
        topic: str,
        attempt_id: str,
        wanted: int,
        visibility_s: int,
        wait_s: int,
    ) -> list[Received]:
        """A FIFO receive with a ReceiveRequestAttemptId, made by the queue's attempt home
        (`FifoService.receive`), long poll included."""
        answer = await self.call(
            owner,
            "receive_attempt",
            {
                "topic": topic,
                "attempt_id": attempt_id,
                "max": wanted,
                "visibility_s": visibility_s,
                "wait_s": wait_s,
            },
            wait_s + CALL_TIMEOUT_S,
        )
        return [decode_received(raw) for raw in answer["received"]]

    async def restart_attempt(
        self, owner: Owner, topic: str, receipt_handles: list[str], visibility_s: int
    ) -> list[bool | None]:
        """`FifoService.restart_here` on the owner of these handles' partitions."""
        answer = await self.call(
            owner,
            "restart_attempt",
            {"topic": topic, "handles": receipt_handles, "visibility_s": visibility_s},
        )
        return [None if kept is None else bool(kept) for kept in answer["kept"]]

    async def park(
        self,
        owners: Iterable[tuple[Owner, list[PartitionKey]]],
        topic: str,
        local: Awaitable[Any],
        timeout_s: float,
    ) -> None:
        """Wait until something may be visible here (`local`) or on one of the owners, or
        `timeout_s` passes. An owner that cannot be reached is waited out, not retried."""

        async def remote(owner: Owner, pks: list[PartitionKey]) -> None:
            try:
                await self.call(
                    owner,
                    "wait",
                    {
                        "topic": topic,
                        "partitions": [pk.partition for pk in pks],
                        "timeout_ms": int(timeout_s * 1000),
                    },
                    timeout_s + CALL_TIMEOUT_S,
                )
            except SqsError:
                await asyncio.sleep(timeout_s)

        tasks = [asyncio.ensure_future(local)]
        tasks += [asyncio.ensure_future(remote(owner, pks)) for owner, pks in owners]
        try:
            await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def counts(self, owners: dict[Owner, list[PartitionKey]], topic: str) -> Counts:
        total = Counts()
        for owner, pks in owners.items():
            answer = await self.call(
                owner, "counts", {"topic": topic, "partitions": [pk.partition for pk in pks]}
            )
            total = total + Counts(answer["visible"], answer["in_flight"], answer["delayed"])
        return total

    async def gauges(
        self, owner: Owner, partitions: dict[str, list[int]]
    ) -> dict[str, QueueGaugeParts]:
        """The owner's part of the gauges of these queue topics (their partitions it
        serves); a topic it did not answer for, or all when it cannot be reached, is absent."""
        try:
            answer = await self.call(owner, "gauges", {"partitions": partitions})
        except SqsError:
            return {}  # logged by `call`; the queues wait for the next round
        # No "gauges" member: an owner of an older version (unknown operation).
        gauges: dict[str, list[int | None]] = answer.get("gauges", {})
        return {topic: QueueGaugeParts.decode(raw) for topic, raw in gauges.items()}

    async def lease_facts(
        self, owner: Owner, topic: str, wanted: dict[int, list[int]]
    ) -> dict[int, LeaseFacts]:
        """The owner's lease facts of these offsets of its partitions, for a browse
        (PeekMessages): a partition it did not answer for, or all when it cannot be reached
        or no longer serves one of them, is absent (the browse shows those as UNKNOWN)."""
        try:
            answer = await self.call(
                owner,
                "lease_facts",
                {"topic": topic, "wanted": {str(p): offsets for p, offsets in wanted.items()}},
            )
        except SqsError:
            return {}  # logged by `call`
        found: dict[str, dict[str, Any]] = answer.get("partitions", {})
        return {int(p): LeaseFacts.decode(raw) for p, raw in found.items()}

    async def delete(self, owner: Owner, topic: str, receipt_handle: str) -> bool:
        """Whether the owner removed the message (False: it was gone already). A gateway
        of a version before this answer existed counted its removals itself: True."""
        answer = await self.call(owner, "delete", {"topic": topic, "handle": receipt_handle})
        return bool(answer.get("removed", True))

    async def change_visibility(
        self, owner: Owner, topic: str, receipt_handle: str, visibility_s: int
    ) -> None:
        await self.call(
            owner,
            "change_visibility",
            {"topic": topic, "handle": receipt_handle, "visibility_s": visibility_s},
        )

    async def fifo_send(
        self, owner: Owner, topic: str, message: StoredMessage, claimed: bool = False
    ) -> FifoSent:
        """A FIFO send, deduplicated by the owner of its group's partition, or first claimed
        by the owner of its deduplication id's claim partition (`claimed` False, scope
        `queue`: `lease_store/fifo_claims.py`)."""
        answer = await self.call(
            owner,
            "fifo_send",
            {
                "topic": topic,
                "message": base64.b64encode(message.encode()).decode(),
                "claimed": claimed,
            },
        )
        return FifoSent(
            str(answer["message_id"]), str(answer["sequence_number"]), bool(answer["duplicate"])
        )

    async def fifo_entry(
        self, owner: Owner, topic: str, partition: int, scope_key: bytes
    ) -> DedupEntry | None:
        """The owner's deduplication window entry of `scope_key` in `partition`, if any."""
        answer = await self.call(
            owner, "fifo_entry", {"topic": topic, "partition": partition, "key": scope_key.hex()}
        )
        entry = answer.get("entry")
        if entry is None:
            return None
        return DedupEntry(int(entry["sent_ms"]), int(entry["offset"]), str(entry["message_id"]))

    async def purge(self, owner: Owner, topic: str, ends: dict[int, int]) -> int:
        answer = await self.call(
            owner, "purge", {"topic": topic, "ends": {str(p): e for p, e in ends.items()}}
        )
        return int(answer["dropped"])

    # -- message move tasks (`gateway/sqs/move_tasks.py`) ---------------------------------------
    # The first three go to the source queue's home gateway (the one serving its partition
    # 0), which runs its tasks; `hold` and `remove_held` to the owners of its partitions.

    async def start_move_task(
        self,
        home: Owner,
        topic: str,
        source_arn: str,
        destination_arn: str | None,
        max_per_second: int | None,
    ) -> str:
        """Start a task on the source queue's home gateway; returns its TaskHandle."""
        answer = await self.call(
            home,
            "move_task_start",
            {
                "topic": topic,
                "source_arn": source_arn,
                "destination_arn": destination_arn,
                "max_per_second": max_per_second,
            },
        )
        return str(answer["handle"])

    async def list_move_tasks(
        self, home: Owner, topic: str, max_results: int
    ) -> list[dict[str, Any]]:
        """The source queue's most recent tasks on its home gateway, each as
        `MoveTaskSummary.encode` gives it."""
        answer = await self.call(home, "move_task_list", {"topic": topic, "max": max_results})
        tasks: list[dict[str, Any]] = answer["tasks"]
        return tasks

    async def cancel_move_task(self, home: Owner, topic: str, task_id: str) -> int:
        """Cancel a task on its home gateway; returns how many messages it had moved."""
        answer = await self.call(home, "move_task_cancel", {"topic": topic, "task_id": task_id})
        return int(answer["moved"])

    async def hold(
        self, owner: Owner, topic: str, partitions: list[int], wanted: int
    ) -> list[tuple[int, Delivery]]:
        """Hold up to `wanted` visible messages of the owner's partitions for a move task:
        (partition, delivery) of each."""
        answer = await self.call(
            owner, "move_hold", {"topic": topic, "partitions": partitions, "max": wanted}
        )
        return [decode_held(raw) for raw in answer["held"]]

    async def remove_held(self, owner: Owner, topic: str, partition: int, offset: int) -> None:
        """Remove a message a move task has moved from the owner's partition."""
        await self.call(
            owner, "move_remove", {"topic": topic, "partition": partition, "offset": offset}
        )
