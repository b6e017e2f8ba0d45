"""Message move tasks: redrive the messages of a dead-letter queue to another queue.

StartMessageMoveTask starts one asyncio task per move; CancelMessageMoveTask and
ListMessageMoveTasks read and steer it. A task repeatedly

1. holds up to 10 visible messages of the source (the DLQ) in the lease store: a dedicated
   hold, not a client receive, so their receive count and first-receive time stay as they
   were (`LeaseStore.hold`);
2. sends each to its destination: the task's DestinationArn, or else the queue the message
   was dead-lettered from (its DeadLetterQueueSourceArn);
3. removes it from the DLQ once the destination acknowledged it (at least once: a crash
   between the two leaves it in both queues);

at most MaxNumberOfMessagesPerSecond (500 when not given). As in SQS, a moved message is a
new message: a new MessageId and SentTimestamp (so its retention period starts again), the
same body, message attributes, SenderId, AWSTraceHeader and MessageGroupId, no
DeadLetterQueueSourceArn, and the destination queue's DelaySeconds.

ApproximateNumberOfMessagesToMove is the DLQ's visible count at start. The task is COMPLETED
when it has handled that many or nothing is visible in the DLQ any more; FAILED when a queue
it needs is gone or Kafka does not answer (the messages it held then become visible in the DLQ
again when their hold ends, after at most `HOLD_MS`).

Tasks outlive their gateway: the home writes each task to `__kqs_move_tasks`
(`topology/move_task_log.py`) when it starts, about once a second while it moves, when a
cancel is asked for and when it ends. A gateway that becomes a source queue's home (at
start-up, or when it is given the queue's partition 0) lists the tasks the last home listed and
runs on those left RUNNING, from the count last written (so ApproximateNumberOfMessagesMoved
may count again the messages of the last second); one left CANCELLING is CANCELLED.

With several gateways (`gateway/cluster/ownership.py`), a source queue's tasks run on its **home**:
the gateway serving its partition 0. Start, List and Cancel arriving elsewhere are forwarded
to it (`move_task_*` on the internal channel, `gateway/cluster/forwarding.py`), after the action
validated them, so every gateway answers as the home does. The home holds the messages of
the partitions it serves itself and those of the others through their owners (`move_hold`),
sends them through its own `MessageService`, and has the owner remove each one it moved
(`move_remove`). A partition nobody serves (a rebalance) is skipped for that round, and one
whose owner cannot be reached too; the task completes when nothing visible is left in the
partitions it reaches. A remove that finds nobody serving the partition fails the task, the
message sent already (the at-least-once case of step 3). A home that stops serving partition
0 stops its running tasks without a last word, and the new home runs them on; the messages
the old home held become visible again after `HOLD_MS`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from confluent_kafka import KafkaException

from gateway.cluster.forwarding import Forwarder
from gateway.common import limits
from gateway.common.errors import (
    InternalError,
    InvalidParameterValue,
    QueueDoesNotExist,
    ResourceNotFound,
    ServiceUnavailable,
    SqsError,
)
from gateway.sqs.messages.service import MessageService
from gateway.sqs.queues import QueueRegistry, attribute_int, is_fifo
from lease_store.clock import Clock
from lease_store.keys import PartitionKey
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from lease_store.types import Delivery
from topology.catalog import QueueRecord, partition_keys
from topology.move_task_log import LoggedTask, MoveTaskLog
from topology.owners import Owner
from topology.producer import ProduceFailed

log = logging.getLogger("kqs.move_tasks")

MOVE_BATCH = 10
# How long a message taken by a task stays out of sight: longer than a send can take
# (Kafka delivery timeout plus the wait for ingest), so it is never delivered meanwhile.
HOLD_MS = 60_000
# Finished tasks remembered per source queue, for ListMessageMoveTasks.
HISTORY = limits.MAX_MOVE_TASK_RESULTS
# How often a running task's progress is written to `__kqs_move_tasks`.
PROGRESS_EVERY_S = 1.0
# How long a shutdown waits for the running tasks to finish the messages in hand.
CLOSE_TIMEOUT_S = 5.0


class MoveTaskStatus(Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


ACTIVE = (MoveTaskStatus.RUNNING, MoveTaskStatus.CANCELLING)


@dataclass(eq=False)
class MoveTask:
    task_id: str
    handle: str
    source: QueueRecord
    source_arn: str
    destination_arn: str | None
    max_per_second: int | None
    to_move: int
    started_ms: int
    status: MoveTaskStatus = MoveTaskStatus.RUNNING
    moved: int = 0
    failure_reason: str | None = None
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None

    def logged(self) -> LoggedTask:
        return LoggedTask(self.task_id, self.source.topic, self.summary().encode())

    def summary(self) -> MoveTaskSummary:
        return MoveTaskSummary(
            handle=self.handle,
            status=self.status,
            source_arn=self.source_arn,
            destination_arn=self.destination_arn,
            max_per_second=self.max_per_second,
            moved=self.moved,
            to_move=self.to_move,
            failure_reason=self.failure_reason,
            started_ms=self.started_ms,
        )


@dataclass(frozen=True)
class MoveTaskSummary:
    """What ListMessageMoveTasks shows of a task, here or from its home gateway."""

    handle: str
    status: MoveTaskStatus
    source_arn: str
    destination_arn: str | None
    max_per_second: int | None
    moved: int
    to_move: int
    failure_reason: str | None
    started_ms: int

    def encode(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> MoveTaskSummary:
        return cls(**{**raw, "status": MoveTaskStatus(raw["status"])})


def encode_handle(task_id: str, source_arn: str) -> str:
    """An opaque TaskHandle: base64 of the task id and the source queue ARN."""
    return base64.b64encode(f"{task_id}&{source_arn}".encode()).decode("ascii")


def decode_handle(handle: str) -> tuple[str, str] | None:
    """(task id, source ARN) of a TaskHandle, or None when it is not one."""
    try:
        task_id, _, source_arn = base64.b64decode(handle, validate=True).decode().partition("&")
        uuid.UUID(task_id)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (task_id, source_arn) if source_arn else None


class _LeftHere(Exception):
    """A task stops here without ending: the gateway shuts down (`last_word`: its count is
    written for the next home) or stopped serving the source's partition 0 (the new home,
    which may have run it on already, has the word)."""

    def __init__(self, last_word: bool) -> None:
        super().__init__()
        self.last_word = last_word


class MoveTasks:
    """The move tasks of the source queues whose home this gateway is (all with one
    gateway), running or finished; requests about the others go to their home."""

    def __init__(
        self,
        clock: Clock,
        registry: QueueRegistry,
        messages: MessageService,
        leases: LeaseStore,
        task_log: MoveTaskLog,
    ) -> None:
        self._clock = clock
        self._registry = registry
        self._messages = messages
        self._leases = leases
        self._log = task_log
        self._by_id: dict[str, MoveTask] = {}
        # Queue topic (so one incarnation of the source queue) -> its tasks, newest first.
        self._by_source: dict[str, list[MoveTask]] = {}
        self._adopting: dict[str, asyncio.Task[None]] = {}  # by queue topic
        self._forgetting: set[asyncio.Task[None]] = set()  # tasks of deleted queues
        self._closing = asyncio.Event()

    # -- requests (validated by the actions; `forward` False: from another gateway) ---------

    async def start(
        self,
        source: QueueRecord,
        source_arn: str,
        destination_arn: str | None,
        max_per_second: int | None,
        forward: bool = True,
    ) -> str:
        """Start a task on the source queue's home; returns its TaskHandle."""
        home = self._home_elsewhere(source, forward)
        if home is not None:
            owner, forwarder = home
            return await forwarder.start_move_task(
                owner, source.topic, source_arn, destination_arn, max_per_second
            )
        to_move = (await self._messages.queue_counts(source)).visible  # over all partitions
        # From here on no await: the check below and the task's registration are one step.
        history = self._by_source.setdefault(source.topic, [])
        if any(task.status in ACTIVE for task in history):
            raise InvalidParameterValue(
                "There is already a task running. Only one active task is allowed for a source "
                "queue arn at a given time."
            )
        task_id = str(uuid.uuid4())
        task = MoveTask(
            task_id=task_id,
            handle=encode_handle(task_id, source_arn),
            source=source,
            source_arn=source_arn,
            destination_arn=destination_arn,
            max_per_second=max_per_second,
            to_move=to_move,
            started_ms=self._clock.now_ms(),
        )
        history.insert(0, task)
        forgotten = history[HISTORY:]
        del history[HISTORY:]  # none of them is active: the only active one was refused above
        for old in forgotten:
            self._by_id.pop(old.task_id, None)
        self._by_id[task_id] = task
        try:
            await self._log.write(task.logged())  # durable before the client has its handle
        except (ProduceFailed, KafkaException) as error:
            history.remove(task)
            del self._by_id[task_id]
            raise ServiceUnavailable("The task could not be recorded. Retry later.") from error
        for old in forgotten:
            await self._forget(old.task_id)
        task.runner = asyncio.create_task(self._run(task), name=f"move-task-{task_id}")
        log.info(
            "message move task started",
            extra={
                "task": task_id,
                "source": source_arn,
                "destination": destination_arn or "each message's source queue",
                "to_move": task.to_move,
            },
        )
        return task.handle

    async def summaries(
        self, source: QueueRecord, max_results: int, forward: bool = True
    ) -> list[MoveTaskSummary]:
        """The source queue's most recent tasks, most recent first."""
        home = self._home_elsewhere(source, forward)
        if home is not None:
            owner, forwarder = home
            found = await forwarder.list_move_tasks(owner, source.topic, max_results)
            return [MoveTaskSummary.decode(raw) for raw in found]
        return [task.summary() for task in self._by_source.get(source.topic, [])[:max_results]]

    async def cancel(self, source: QueueRecord, task_id: str, forward: bool = True) -> int:
        """Ask a RUNNING task of the source queue to stop after the messages in hand; returns
        how many it moved."""
        home = self._home_elsewhere(source, forward)
        if home is not None:
            owner, forwarder = home
            return await forwarder.cancel_move_task(owner, source.topic, task_id)
        task = self._by_id.get(task_id)
        if task is None or task.source.topic != source.topic:
            raise ResourceNotFound("Task does not exist.")
        if task.status is not MoveTaskStatus.RUNNING:
            # The API model lists ResourceNotFoundException as this action's only sender error.
            raise ResourceNotFound(
                f"Only a RUNNING task can be cancelled; this task is {task.status.value}."
            )
        task.status = MoveTaskStatus.CANCELLING
        task.cancel_requested.set()
        await self._write(task)  # a home taking over meanwhile ends it as CANCELLED
        return task.moved

    def _home_elsewhere(self, source: QueueRecord, forward: bool) -> tuple[Owner, Forwarder] | None:
        """The source queue's home gateway and the channel to it, when that is not this one.

        Raises `ServiceUnavailable` while nobody serves partition 0 (a rebalance), and
        `NotServedHere` for a forwarded request (`forward` False) that reached a gateway no
        longer its home.
        """
        return self._messages.owner_elsewhere(source, partition_keys(source)[0], forward)

    async def close(self) -> None:
        """Stop every running task (gateway shutdown), each after the messages in hand and
        with its count written, so that the next home of its source queue (this gateway
        once restarted, or another) runs it on from there; cancelled if that takes longer
        than `CLOSE_TIMEOUT_S`."""
        self._closing.set()
        for adopting in self._adopting.values():
            adopting.cancel()
        runners = [t.runner for t in self._by_id.values() if t.runner and not t.runner.done()]
        runners.extend(self._adopting.values())
        runners.extend(self._forgetting)
        if not runners:
            return
        _, late = await asyncio.wait(runners, timeout=CLOSE_TIMEOUT_S)
        for runner in late:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)

    # -- a new home takes over -------------------------------------------------------------

    def became_home(self, source: QueueRecord) -> None:
        """This gateway serves `source`'s partition 0 now (at start-up with one gateway):
        take over the tasks the last home left (`_adopt`)."""
        if source.topic not in self._adopting and self._log.tasks_of(source.topic):
            adopting = asyncio.create_task(self._adopt(source), name=f"adopt-{source.topic}")
            self._adopting[source.topic] = adopting
            adopting.add_done_callback(lambda _: self._adopting.pop(source.topic, None))

    async def _adopt(self, source: QueueRecord) -> None:
        if not await self._log.caught_up():
            log.warning("move tasks taken over before the last home's last records were read")
        if self._closing.is_set() or not self._messages.ownership.serves(source.topic, 0):
            return  # shutting down, or moved on meanwhile: the next home adopts them
        history = self._by_source.setdefault(source.topic, [])
        known = {task.task_id for task in history}
        for logged in self._log.tasks_of(source.topic):
            if logged.task_id in known:
                continue
            summary = MoveTaskSummary.decode(logged.fields)
            task = MoveTask(
                task_id=logged.task_id,
                handle=summary.handle,
                source=source,
                source_arn=summary.source_arn,
                destination_arn=summary.destination_arn,
                max_per_second=summary.max_per_second,
                to_move=summary.to_move,
                started_ms=summary.started_ms,
                status=summary.status,
                moved=summary.moved,
                failure_reason=summary.failure_reason,
            )
            history.append(task)
            self._by_id[task.task_id] = task
        history.sort(key=lambda task: task.started_ms, reverse=True)
        for old in history[HISTORY:]:  # left by a home whose tombstones did not get through
            if old.status not in ACTIVE:
                history.remove(old)
                self._by_id.pop(old.task_id, None)
        for task in history:
            if task.status is MoveTaskStatus.CANCELLING and task.runner is None:
                task.status = MoveTaskStatus.CANCELLED
                await self._write(task)
            elif task.status is MoveTaskStatus.RUNNING and task.runner is None:
                log.info(
                    "message move task taken over",
                    extra={"task": task.task_id, "moved": task.moved, "to_move": task.to_move},
                )
                task.runner = asyncio.create_task(self._run(task), name=f"move-task-{task.task_id}")

    # -- a source queue deleted --------------------------------------------------------------

    def queue_deleted(self, source_topic: str) -> None:
        """The source queue (this incarnation) is gone; call on its home. Its tasks end with
        it: a running one finds the queue gone at its next batch and ends FAILED, and then
        every task's record is tombstoned, so the log does not keep (and every gateway load
        at start-up) the tasks of queues that no longer exist."""
        tasks = self._by_source.pop(source_topic, [])
        for task in tasks:
            self._by_id.pop(task.task_id, None)
        task_ids = {task.task_id for task in tasks}
        task_ids.update(logged.task_id for logged in self._log.tasks_of(source_topic))
        if not task_ids:
            return
        runners = [task.runner for task in tasks if task.runner and not task.runner.done()]
        forgetting = asyncio.create_task(
            self._forget_after(runners, sorted(task_ids)), name=f"forget-{source_topic}"
        )
        self._forgetting.add(forgetting)
        forgetting.add_done_callback(self._forgetting.discard)

    def sources_deleted(self, live_topics: set[str]) -> list[str]:
        """The queue topics the log has tasks of that are not among `live_topics`."""
        return sorted(self._log.source_topics() - live_topics)

    async def _forget_after(self, runners: list[asyncio.Task[None]], task_ids: list[str]) -> None:
        # A runner's last record must not land after the tombstone and bring the task back.
        await asyncio.gather(*runners, return_exceptions=True)
        for task_id in task_ids:
            await self._forget(task_id)

    def _stopped_here(self, source_topic: str) -> None:
        """Forget a source queue's tasks: its new home lists and runs them now."""
        for task in self._by_source.pop(source_topic, []):
            self._by_id.pop(task.task_id, None)

    async def _write(self, task: MoveTask) -> None:
        """Record the task's state; a failure only costs a later home a stale count (or, for
        a last word, running the task on: at least once)."""
        try:
            await self._log.write(task.logged())
        except (ProduceFailed, KafkaException) as error:
            log.warning(
                "message move task not recorded", extra={"task": task.task_id, "error": str(error)}
            )

    async def _forget(self, task_id: str) -> None:
        try:
            await self._log.forget(task_id)
        except (ProduceFailed, KafkaException) as error:
            log.warning("old move task not forgotten", extra={"task": task_id, "error": str(error)})

    # -- what the owner of a source partition does for a task (or for the home's) -------------

    def hold_here(
        self, source: QueueRecord, partitions: list[int], wanted: int
    ) -> list[tuple[PartitionKey, Delivery]]:
        """Hold up to `wanted` visible messages of these partitions, served here
        (`NotServedHere` otherwise), out of sight for `HOLD_MS`."""
        now_ms = self._clock.now_ms()
        retention_ms = 1000 * attribute_int(source, "MessageRetentionPeriod")
        keys = partition_keys(source)
        held: list[tuple[PartitionKey, Delivery]] = []
        for partition in self._messages.served_here(source, partitions):
            if len(held) >= wanted:
                break
            pk = keys[partition]
            if is_fifo(source):
                # A FIFO DLQ: groups in order, none another consumer holds (and each locked
                # while its messages are held).
                taken = self._leases.receive_fifo(
                    pk, now_ms, wanted - len(held), 0, retention_ms, hold_ms=HOLD_MS
                ).delivered
            else:
                taken = self._leases.hold(pk, now_ms, wanted - len(held), HOLD_MS, retention_ms)
            held.extend((pk, delivery) for delivery in taken)
        return held

    async def remove(
        self, source: QueueRecord, pk: PartitionKey, offset: int, forward: bool = True
    ) -> None:
        """Remove a moved message from the source, through its partition's owner now (the
        one that held it, or the gateway the partition moved to since, which has the hold
        from the changelog)."""
        owner = self._messages.owner_elsewhere(source, pk, forward)
        if owner is not None:
            gateway, forwarder = owner
            await forwarder.remove_held(gateway, source.topic, pk.partition, offset)
            return
        self._leases.remove(pk, offset, self._clock.now_ms())

    # -- the task itself -------------------------------------------------------------------

    async def _run(self, task: MoveTask) -> None:
        rate = task.max_per_second or limits.MAX_MOVE_MESSAGES_PER_SECOND
        loop = asyncio.get_running_loop()
        started_s = loop.time()
        handled = task_start_moved = task.moved  # > 0 when run on where an earlier home left it
        written_s = time.monotonic()
        try:
            while handled < task.to_move and not task.cancel_requested.is_set():
                if self._closing.is_set():
                    raise _LeftHere(last_word=True)
                source = self._registry.current(task.source)
                if source is None:
                    raise QueueDoesNotExist()
                if not self._messages.ownership.serves(source.topic, 0):
                    # Partition 0 moved: the new home answers for the queue's tasks now and
                    # runs this one on, so it must not go on here beside it.
                    raise _LeftHere(last_word=False)
                held = await self._hold(source, min(MOVE_BATCH, rate, task.to_move - handled))
                if not held:
                    break  # nothing visible in the DLQ any more
                handled += len(held)
                outcomes = await asyncio.gather(
                    *(self._move(task, source, pk, delivery) for pk, delivery in held),
                    return_exceptions=True,
                )
                for outcome in outcomes:
                    if isinstance(outcome, Exception):
                        raise outcome
                if time.monotonic() - written_s >= PROGRESS_EVERY_S:
                    written_s = time.monotonic()
                    await self._write(task)
                delay_s = started_s + (handled - task_start_moved) / rate - loop.time()
                if delay_s > 0:
                    await self._pause(task, delay_s)
        except _LeftHere as left:
            log.info("message move task left to the next home", extra={"task": task.task_id})
            if left.last_word:
                await self._write(task)
            else:
                self._stopped_here(task.source.topic)
            return
        except SqsError as error:
            self._fail(task, error.code, error.message)
        except (ProduceFailed, KafkaException) as error:
            self._fail(task, ServiceUnavailable.code, str(error))
        except Exception as error:
            log.exception("message move task failed", extra={"task": task.task_id})
            self._fail(task, InternalError.code, str(error))
        else:
            cancelled = task.cancel_requested.is_set() or task.status is MoveTaskStatus.CANCELLING
            task.status = MoveTaskStatus.CANCELLED if cancelled else MoveTaskStatus.COMPLETED
            log.info(
                "message move task cancelled" if cancelled else "message move task completed",
                extra={"task": task.task_id, "moved": task.moved},
            )
        await self._write(task)

    async def _pause(self, task: MoveTask, delay_s: float) -> None:
        """Pace a task to its rate: sleep `delay_s`, waking at once for a cancel or a
        shutdown."""
        wakers = [
            asyncio.ensure_future(task.cancel_requested.wait()),
            asyncio.ensure_future(self._closing.wait()),
        ]
        try:
            await asyncio.wait(wakers, timeout=delay_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waker in wakers:
                waker.cancel()

    async def _hold(self, source: QueueRecord, wanted: int) -> list[tuple[PartitionKey, Delivery]]:
        """Up to `wanted` messages of the source, from the partitions served here first, then
        from the other owners'."""
        served = [pk.partition for pk in self._messages.served(source)]
        held = self.hold_here(source, served, wanted)
        keys = partition_keys(source)
        for owner, pks in self._messages.owners(source, keys).items():
            if len(held) >= wanted:
                break
            forwarder = self._messages.forwarder_for(owner)
            try:
                taken = await forwarder.hold(
                    owner, source.topic, [pk.partition for pk in pks], wanted - len(held)
                )
            except ServiceUnavailable:
                # Moving to another gateway, or its gateway is gone: skipped this round, as a
                # partition nobody serves is.
                continue
            held.extend((keys[partition], delivery) for partition, delivery in taken)
        return held

    async def _move(
        self, task: MoveTask, source: QueueRecord, pk: PartitionKey, delivery: Delivery
    ) -> None:
        await self._messages.encryption.ready_to_open([delivery.message])  # KMS: in a thread
        original = self._messages.encryption.open(delivery.message)
        target_arn = task.destination_arn or original.dead_letter_source_arn
        destination = self._registry.by_arn(target_arn) if target_arn else None
        if destination is None:
            raise QueueDoesNotExist()
        moved = StoredMessage(
            message_id=str(uuid.uuid4()),
            body=original.body,
            sent_ms=self._clock.now_ms(),
            delay_s=attribute_int(destination, "DelaySeconds"),
            attributes=original.attributes,
            sender_id=original.sender_id,
            aws_trace_header=original.aws_trace_header,
            message_group_id=original.message_group_id,
            deduplication_id=original.deduplication_id,  # kept, but no longer deduplicated
        )
        await self._messages.send(destination, moved)
        await self.remove(source, pk, delivery.offset)
        task.moved += 1
        log.info(
            "message moved",
            extra={
                "task": task.task_id,
                "from_message_id": original.message_id,
                "message_id": moved.message_id,
                "queue": destination.key,
            },
        )

    @staticmethod
    def _fail(task: MoveTask, reason: str, detail: str) -> None:
        task.status = MoveTaskStatus.FAILED
        task.failure_reason = reason
        log.warning(
            "message move task failed",
            extra={"task": task.task_id, "reason": reason, "detail": detail, "moved": task.moved},
        )
