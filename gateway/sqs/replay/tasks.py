"""Message replay tasks: re-send what a queue's log holds in a range, deleted or not.

StartMessageReplayTask starts one asyncio task per replay; ListMessageReplayTasks and
CancelMessageReplayTask read and steer it, as the message move tasks (`move_tasks.py`) are
read and steered. A task

1. fixes its range when it starts: per partition of the source queue's topic, a start offset
   (the first record sent at `since` or later, or the offsets given) and an end offset (the
   first record after `until`, else the log's end at start, so a replay into its own queue
   never reads what it writes); a range that begins before the oldest message the log and
   the queue's retention still hold is refused (`ranges.py`);
2. reads the range in log order with a consumer of its own (`topology/log_reader.py`: no
   group, nothing committed, so the queue's consumers see nothing of it);
3. sends each record to the destination (the source itself by default) as a new message: a
   new MessageId, receipt handles and SentTimestamp; the same body, message attributes (so
   the same MD5s), SenderId, AWSTraceHeader and MessageGroupId; the destination's
   DelaySeconds; and the replay's origin (`StoredMessage.replay_of`: this task, the source
   coordinates, the original MessageId and SentTimestamp), which receivers see as the
   `KqsReplayOfMessageId` and `KqsReplayOfSentTimestamp` attributes and Kafka consumers as
   the `kqs.replay-of` header. Into a FIFO destination each group's messages are sent one
   after the other, in log order, with the deduplication id `<task>-<partition>-<offset>`,
   which no client-chosen id of the original collides with;

at most `MaxNumberOfMessagesPerSecond` when given. Batches of up to `BATCH` records (or the
rate) are read while the last ones are sent, and up to `pipeline.DEPTH` batches are on their
way at once into a standard queue (one into a FIFO queue), settled oldest first
(`pipeline.py`).

**Durable, and nothing twice.** The task is a record on `__kqs_replay_tasks` (the move
tasks' log, `topology/move_task_log.py`, on a topic of its own), written when it starts,
about every `KQS_REPLAY_CHECKPOINT_S` (1 s) while it runs (a checkpoint), when a cancel is
asked for and when it ends. A checkpoint records the next source offset of each partition
past a run of acknowledged batches, the count, and the destination's end offsets read before
any later batch was sent (`SendPipeline.mark`, `due_checkpoint`). A gateway that runs the task on (this one
restarted, or another) reads the destination from those end offsets to its end and collects
the source coordinates this task's records name (`kqs.replay-of`): whatever the last runner
sent after its last checkpoint is there, and skipped. The range is then read on from the
checkpoint. A record still on its way to the broker when the runner died is either in the
destination's log (skipped) or was never written (sent now): no source record is sent twice.

**Where a task runs.** On the gateway that started it. With one gateway a restart runs on
the tasks left RUNNING. With several (`KQS_PARTITION_OWNERSHIP=group`), every gateway
follows the task log: a task whose runner stopped writing for `KQS_REPLAY_ORPHANED_AFTER_S`
(15 s) is run on by the home of its source queue (the gateway serving its partition 0); a
cancel asked of another gateway is written to the log, and the runner reads it there. Every
gateway lists a task as the log has it, so all answer the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from confluent_kafka import KafkaException

from gateway.common.errors import (
    InternalError,
    InvalidParameterValue,
    QueueDoesNotExist,
    ResourceNotFound,
    ServiceUnavailable,
    SqsError,
)
from gateway.observability.events import EventSink
from gateway.sqs.fifo import FifoService
from gateway.sqs.messages.service import MessageService

# A replay task's TaskHandle is shaped as a move task's (the task id and the source ARN).
from gateway.sqs.move_tasks import encode_handle
from gateway.sqs.queues import QueueRegistry, attribute_int, is_fifo
from gateway.sqs.replay import ranges
from gateway.sqs.replay.pipeline import DEPTH, SendPipeline
from lease_store.clock import Clock
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord
from topology.log_reader import LoggedMessage, LogReader
from topology.move_task_log import LoggedTask, MoveTaskLog
from topology.producer import ProduceFailed
from topology.record_format import ReplayOrigin

log = logging.getLogger("kqs.replay_tasks")

# Records read and sent at a time: one checkpoint at most per batch.
BATCH = 1000
HISTORY = 10  # finished tasks remembered per source queue
CLOSE_TIMEOUT_S = 5.0
# Several gateways: a RUNNING task whose record is older than this (`KQS_REPLAY_ORPHANED_AFTER_S`)
# is taken to have lost its runner, and the source queue's home runs it on; it looks for such
# tasks this often (at most a third of that age).
ORPHANED_AFTER_S = 15.0
ADOPT_EVERY_S = 5.0
MAX_RATE = 100_000


class ReplayStatus(Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


ACTIVE = (ReplayStatus.RUNNING, ReplayStatus.CANCELLING)


def _ints(raw: dict[str, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in raw.items()}


@dataclass
class ReplaySummary:
    """A task's durable record and what ListMessageReplayTasks shows of it."""

    handle: str
    status: ReplayStatus
    source_arn: str
    destination_arn: str
    since_ms: int | None
    until_ms: int | None
    max_per_second: int | None
    starts: dict[int, int]
    ends: dict[int, int]
    positions: dict[int, int]  # the next source offset to send, per partition
    destination_marks: dict[int, int]  # the destination's end offsets at the checkpoint
    replayed: int
    to_replay: int
    started_ms: int
    updated_ms: int
    failure_reason: str | None = None
    # Which gateway run runs it (`ReplayTasks.runner_id`): a runner that finds another one's
    # id in the log was taken over (it went quiet for too long) and stops. None: older records.
    runner: str | None = None

    def encode(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> ReplaySummary:
        fields = dict(raw)
        fields["status"] = ReplayStatus(raw["status"])
        for name in ("starts", "ends", "positions", "destination_marks"):
            fields[name] = _ints(raw[name])
        return cls(**fields)


@dataclass(eq=False)
class ReplayTask:
    task_id: str
    source: QueueRecord
    summary: ReplaySummary
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None

    def logged(self) -> LoggedTask:
        return LoggedTask(self.task_id, self.source.topic, self.summary.encode())


@dataclass(frozen=True)
class ReplayRequest:
    source: QueueRecord
    destination: QueueRecord
    since_ms: int | None
    until_ms: int | None
    start_offsets: dict[int, int] | None
    end_offsets: dict[int, int] | None
    max_per_second: int | None


class _Cancelled(Exception):
    """A cancel reached the runner: the task ends CANCELLED."""


class _Stop(Exception):
    """The runner stops here without ending the task (shutdown: `last_word` writes its
    checkpoint for the next runner)."""

    def __init__(self, last_word: bool) -> None:
        super().__init__()
        self.last_word = last_word


class ReplayTasks:
    def __init__(
        self,
        clock: Clock,
        registry: QueueRegistry,
        messages: MessageService,
        fifo: FifoService,
        task_log: MoveTaskLog,
        new_reader: Callable[[], LogReader],
        events: EventSink,
        checkpoint_every_s: float = 1.0,
        orphaned_after_s: float = ORPHANED_AFTER_S,
        depth: int = DEPTH,
    ) -> None:
        self._clock = clock
        self._registry = registry
        self._messages = messages
        self._fifo = fifo
        self._log = task_log
        self._new_reader = new_reader
        self._events = events
        self._checkpoint_every_s = checkpoint_every_s
        self._orphaned_after_ms = int(orphaned_after_s * 1000)
        self._depth = depth  # send batches on their way at once (`pipeline.py`)
        self._running: dict[str, ReplayTask] = {}  # by task id: the tasks run here
        self.runner_id = uuid.uuid4().hex  # this gateway's run, as a task's record names it
        self._closing = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None
        task_log.listen(self._read_in_log)

    # -- what a log reader tells, on a worker thread ---------------------------------------

    async def _in_thread(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, call, *args)

    async def log_view(self, record: QueueRecord) -> ranges.LogView:
        reader = self._new_reader()
        try:
            view: ranges.LogView = await self._in_thread(
                read_view, reader, record.topic, record.partitions
            )
            return view
        finally:
            await self._in_thread(reader.close)

    async def oldest_available_ms(self, record: QueueRecord) -> int:
        view = await self.log_view(record)
        return ranges.oldest_available_ms(
            view, self._clock.now_ms(), attribute_int(record, "MessageRetentionPeriod")
        )

    # -- requests (validated by the actions) -----------------------------------------------

    async def start(self, req: ReplayRequest) -> tuple[str, int]:
        """Start a task; returns its TaskHandle and how many records its range holds."""
        source, destination = req.source, req.destination
        if is_fifo(destination) and not is_fifo(source):
            raise InvalidParameterValue(
                "A FIFO destination queue needs a FIFO source queue (its messages' groups)."
            )
        now_ms = self._clock.now_ms()
        reader = self._new_reader()
        try:
            view = await self._in_thread(read_view, reader, source.topic, source.partitions)
            oldest_ms = ranges.oldest_available_ms(
                view, now_ms, attribute_int(source, "MessageRetentionPeriod")
            )
            if req.start_offsets is not None:
                ranges.check_offsets(req.start_offsets, view, oldest_ms)
                starts = dict(req.start_offsets)
            else:
                assert req.since_ms is not None  # the action requires one of the two
                ranges.check_since(req.since_ms, oldest_ms)
                found = await self._in_thread(
                    reader.offsets_at, source.topic, source.partitions, req.since_ms
                )
                starts = dict(enumerate(found))
            if req.end_offsets is not None:
                ends = {p: req.end_offsets.get(p, view.bounds[p][1]) for p in starts}
            elif req.until_ms is not None:
                found = await self._in_thread(
                    reader.offsets_at, source.topic, source.partitions, req.until_ms + 1
                )
                ends = {p: found[p] for p in starts}
            else:
                ends = {p: view.bounds[p][1] for p in starts}
        except KafkaException as error:
            raise ServiceUnavailable("The queue's log could not be read. Retry later.") from error
        finally:
            await self._in_thread(reader.close)
        ends = ranges.ends_within(ends, view)
        starts = {p: max(offset, view.bounds[p][0]) for p, offset in starts.items()}
        try:
            marks = await self._registry.topic_end_offsets(destination)
        except KafkaException as error:
            raise ServiceUnavailable("The destination could not be read. Retry later.") from error
        task_id = str(uuid.uuid4())
        summary = ReplaySummary(
            handle=encode_handle(task_id, source.arn),
            status=ReplayStatus.RUNNING,
            source_arn=source.arn,
            destination_arn=destination.arn,
            since_ms=req.since_ms,
            until_ms=req.until_ms,
            max_per_second=req.max_per_second,
            starts=starts,
            ends=ends,
            positions=dict(starts),
            destination_marks=dict(enumerate(marks)),
            replayed=0,
            to_replay=ranges.total(starts, ends),
            started_ms=now_ms,
            updated_ms=now_ms,
            runner=self.runner_id,
        )
        task = ReplayTask(task_id, source, summary)
        try:
            await self._log.write(task.logged())  # durable before the client has its handle
        except (ProduceFailed, KafkaException) as error:
            raise ServiceUnavailable("The task could not be recorded. Retry later.") from error
        self._run_here(task)
        log.info(
            "message replay task started",
            extra={"task": task_id, "source": source.arn, "to_replay": summary.to_replay},
        )
        await self._forget_old(source.topic)
        return summary.handle, summary.to_replay

    async def summaries(self, source: QueueRecord, max_results: int) -> list[ReplaySummary]:
        """The source queue's most recent tasks, most recent first, as the log has them once
        this gateway has read what it holds now: every gateway answers the same, the runner
        too (its checkpoints are at most `checkpoint_every_s` apart), and a task started
        through another gateway is listed as soon as its start was answered."""
        with contextlib.suppress(KafkaException):  # else answered from what was read
            await self._log.caught_up()
        found: list[ReplaySummary] = []
        for logged in self._log.tasks_of(source.topic):
            try:
                found.append(ReplaySummary.decode(logged.fields))
            except (KeyError, TypeError, ValueError):
                continue
        newest = sorted(found, key=lambda s: s.started_ms, reverse=True)
        return newest[:max_results]

    async def cancel(self, source: QueueRecord, task_id: str) -> int:
        """Ask a RUNNING task to stop after the batch in hand; returns how many it replayed."""
        task = self._run_here_now(task_id)
        if task is not None and task.source.topic == source.topic:
            if task.summary.status is not ReplayStatus.RUNNING:
                raise ResourceNotFound(
                    f"Only a RUNNING task can be cancelled; this task is "
                    f"{task.summary.status.value}."
                )
            task.summary.status = ReplayStatus.CANCELLING
            task.cancel_requested.set()
            await self._write(task)
            return task.summary.replayed
        with contextlib.suppress(KafkaException):  # a task just started through another gateway
            await self._log.caught_up()
        logged = next((t for t in self._log.tasks_of(source.topic) if t.task_id == task_id), None)
        if logged is None:
            raise ResourceNotFound("Task does not exist.")
        summary = ReplaySummary.decode(logged.fields)
        if summary.status is not ReplayStatus.RUNNING:
            raise ResourceNotFound(
                f"Only a RUNNING task can be cancelled; this task is {summary.status.value}."
            )
        # Run elsewhere: the runner reads the cancel in the log (`_read_in_log`), or whoever
        # runs it on.
        summary.status = ReplayStatus.CANCELLING
        try:
            await self._log.write(LoggedTask(task_id, source.topic, summary.encode()))
        except (ProduceFailed, KafkaException) as error:
            raise ServiceUnavailable("The cancel could not be recorded. Retry later.") from error
        return summary.replayed

    def _read_in_log(self, logged: LoggedTask) -> None:
        """A record of the task log as this gateway follows it (several gateways): a cancel
        another gateway wrote for a task run here.

        Seen as it is read, not as the task's latest state, since the runner's next
        checkpoint (RUNNING) may land after it and replace it. A task that ended here
        before the cancel landed writes its last word again, so that the log does not end
        on a CANCELLING that no runner will end."""
        task = self._running.get(logged.task_id)
        if task is None or logged.fields.get("status") != ReplayStatus.CANCELLING.value:
            return
        if task.runner is not None and not task.runner.done():
            task.cancel_requested.set()
        elif task.summary.status not in ACTIVE and self._cancel_logged(task):
            self._spawn(self._write(task), f"replay-ended-{task.task_id}")

    def _logged(self, task: ReplayTask) -> LoggedTask | None:
        """The log's latest record of the task."""
        return next(
            (t for t in self._log.tasks_of(task.source.topic) if t.task_id == task.task_id), None
        )

    def _cancel_logged(self, task: ReplayTask) -> bool:
        """Whether the log's latest record of the task asks for its cancel."""
        logged = self._logged(task)
        return logged is not None and logged.fields.get("status") == ReplayStatus.CANCELLING.value

    # -- running on what was left ----------------------------------------------------------

    def resume_all(self) -> None:
        """At start-up with one gateway: run on every task left RUNNING (or end the ones
        left CANCELLING)."""
        for record in self._registry.all_active():
            self._adopt(record, orphaned_after_ms=0)

    def watch_orphans(self) -> None:
        """Several gateways: now and then, run on the tasks whose runner went silent, of
        the source queues this gateway is home to."""

        every_s = min(ADOPT_EVERY_S, self._orphaned_after_ms / 3000)

        async def watch() -> None:
            while not self._closing.is_set():
                for record in self._registry.all_active():
                    if self._messages.ownership.serves(record.topic, 0):
                        self._adopt(record, self._orphaned_after_ms)
                try:
                    await asyncio.wait_for(self._closing.wait(), every_s)
                except TimeoutError:
                    pass

        self._watch = asyncio.create_task(watch(), name="replay-orphans")

    def _adopt(self, record: QueueRecord, orphaned_after_ms: int) -> None:
        now_ms = self._clock.now_ms()
        for logged in self._log.tasks_of(record.topic):
            if self._run_here_now(logged.task_id) is not None:
                continue
            try:
                summary = ReplaySummary.decode(logged.fields)
            except (KeyError, TypeError, ValueError):
                continue
            if summary.status not in ACTIVE or now_ms - summary.updated_ms < orphaned_after_ms:
                continue
            task = ReplayTask(logged.task_id, record, summary)
            if summary.status is ReplayStatus.CANCELLING:
                summary.status = ReplayStatus.CANCELLED
                self._spawn(self._write(task), f"replay-cancelled-{task.task_id}")
                continue
            log.info(
                "message replay task run on",
                extra={"task": task.task_id, "replayed": summary.replayed},
            )
            self._run_here(task, resumed=True)

    def _spawn(self, work: Any, name: str) -> None:
        asyncio.create_task(work, name=name)

    def _run_here_now(self, task_id: str) -> ReplayTask | None:
        """The task, if this gateway is running it now."""
        task = self._running.get(task_id)
        return task if task is not None and task.runner and not task.runner.done() else None

    def _run_here(self, task: ReplayTask, resumed: bool = False) -> None:
        self._running[task.task_id] = task
        task.summary.runner = self.runner_id
        task.runner = asyncio.create_task(self._run(task, resumed), name=f"replay-{task.task_id}")

    async def close(self) -> None:
        """Stop every running task after its batch in hand, its checkpoint written."""
        self._closing.set()
        runners = [t.runner for t in self._running.values() if t.runner and not t.runner.done()]
        if self._watch is not None:
            runners.append(self._watch)
        if not runners:
            return
        _, late = await asyncio.wait(runners, timeout=CLOSE_TIMEOUT_S)
        for runner in late:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)

    async def _forget_old(self, source_topic: str) -> None:
        finished = [
            (s.started_ms, t.task_id)
            for t in self._log.tasks_of(source_topic)
            if (s := ReplaySummary.decode(t.fields)).status not in ACTIVE
        ]
        for _, task_id in sorted(finished, reverse=True)[HISTORY:]:
            try:
                await self._log.forget(task_id)
            except (ProduceFailed, KafkaException):
                log.warning("old replay task not forgotten", extra={"task": task_id})

    async def _write(self, task: ReplayTask) -> None:
        task.summary.updated_ms = self._clock.now_ms()
        try:
            await self._log.write(task.logged())
        except (ProduceFailed, KafkaException) as error:
            log.warning(
                "message replay task not recorded",
                extra={"task": task.task_id, "error": str(error)},
            )

    # -- the task itself -------------------------------------------------------------------

    async def _run(self, task: ReplayTask, resumed: bool) -> None:
        summary = task.summary
        reader = self._new_reader()
        reading: asyncio.Future[list[LoggedMessage]] | None = None
        pipeline: SendPipeline | None = None

        def settled(records: list[LoggedMessage], sent: int) -> None:
            for logged in records:
                summary.positions[logged.partition] = logged.offset + 1
            summary.replayed += sent

        try:
            destination = self._destination(task)
            skip: set[tuple[int, int]] = set()
            if resumed:
                # Claimed first: a last runner that only stalled reads this and stops.
                await self._write(task)
                skip = await self._sent_after_checkpoint(task, destination, reader)
                summary.replayed += len(skip)
            await self._in_thread(reader.open, task.source.topic, summary.positions, summary.ends)
            rate = summary.max_per_second or MAX_RATE
            pipeline = SendPipeline(1 if is_fifo(destination) else self._depth, settled)
            loop = asyncio.get_running_loop()
            paced_from_s, paced_count = loop.time(), 0
            marked_s = time.monotonic()
            # The next batch is read while the last ones are sent: the log read (a worker
            # thread) and the sends (Kafka's acknowledgements) overlap instead of taking turns.
            reading = asyncio.ensure_future(self._in_thread(reader.read, min(BATCH, rate)))
            while reading is not None:
                batch: list[LoggedMessage] = await reading
                reading = None
                if not reader.done:
                    reading = asyncio.ensure_future(self._in_thread(reader.read, min(BATCH, rate)))
                self._check_steering(task)
                destination = self._destination(task)
                if (
                    time.monotonic() - marked_s >= self._checkpoint_every_s
                    and pipeline.wants_marks()
                ):
                    marked_s = time.monotonic()
                    with contextlib.suppress(KafkaException):  # the last checkpoint stands
                        marks = await self._registry.topic_end_offsets(destination)
                        pipeline.mark(dict(enumerate(marks)))
                fresh = [m for m in batch if (m.partition, m.offset) not in skip]
                await pipeline.add(self._send(task, destination, fresh), batch, len(fresh))
                await self._checkpoint_when_due(task, pipeline)
                paced_count += len(fresh)
                delay_s = paced_from_s + paced_count / rate - loop.time()
                if delay_s > 0:
                    await self._pause(task, delay_s)
            await pipeline.settle()
            self._check_steering(task)
        except _Stop as stop:
            log.info("message replay task left to its next runner", extra={"task": task.task_id})
            if stop.last_word:
                # With the last checkpoint's marks: every batch sent since lies above them.
                if pipeline is not None:
                    await pipeline.abandon()
                await self._write(task)
            return
        except _Cancelled:
            summary.status = ReplayStatus.CANCELLED
            log.info("message replay task cancelled", extra={"task": task.task_id})
        except SqsError as error:
            self._fail(task, error.code, error.message)
        except (ProduceFailed, KafkaException) as error:
            self._fail(task, ServiceUnavailable.code, str(error))
        except Exception as error:
            log.exception("message replay task failed", extra={"task": task.task_id})
            self._fail(task, InternalError.code, str(error))
        else:
            summary.status = ReplayStatus.COMPLETED
            log.info(
                "message replay task completed",
                extra={"task": task.task_id, "replayed": summary.replayed},
            )
        finally:
            if pipeline is not None:
                await pipeline.abandon()  # what is on its way counts once acknowledged
            if reading is not None:
                # The reader is one thread's at a time: the read in flight ends first.
                with contextlib.suppress(Exception):
                    await reading
            await self._in_thread(reader.close)
        await self._write(task)
        if self._cancel_logged(task):
            # A cancel written elsewhere landed after the runner's last check: the log ends
            # on how the task ended (later cancels: `_read_in_log`).
            await self._write(task)

    async def _checkpoint_when_due(self, task: ReplayTask, pipeline: SendPipeline) -> None:
        """Record progress once every batch sent before the last marks were read is
        acknowledged (`SendPipeline`): the marks then bound every record sent before the
        positions, and every record sent after lies above them."""
        marks = pipeline.due_checkpoint()
        if marks is not None:
            task.summary.destination_marks = marks
            await self._write(task)

    def _check_steering(self, task: ReplayTask) -> None:
        """Raise to stop here: a shutdown, or a cancel (asked here or written to the log by
        another gateway)."""
        if self._closing.is_set():
            raise _Stop(last_word=True)
        if task.cancel_requested.is_set() or self._cancel_logged(task):
            raise _Cancelled()
        logged = self._logged(task)
        runner = logged.fields.get("runner") if logged is not None else None
        if runner is not None and runner != self.runner_id:
            log.warning(
                "message replay task taken over by another gateway: stopped here",
                extra={"task": task.task_id},
            )
            raise _Stop(last_word=False)

    def _destination(self, task: ReplayTask) -> QueueRecord:
        if self._registry.current(task.source) is None:
            raise QueueDoesNotExist()
        destination = self._registry.by_arn(task.summary.destination_arn)
        if destination is None:
            raise QueueDoesNotExist()
        return destination

    async def _sent_after_checkpoint(
        self, task: ReplayTask, destination: QueueRecord, reader: LogReader
    ) -> set[tuple[int, int]]:
        """The source coordinates this task sent after its last checkpoint: its records in
        the destination's log from the checkpoint's marks to the end."""
        ends = dict(enumerate(await self._registry.topic_end_offsets(destination)))
        marks = task.summary.destination_marks
        await self._in_thread(reader.open, destination.topic, marks, ends)
        sent: set[tuple[int, int]] = set()
        while not reader.done:
            for logged in await self._in_thread(reader.read, BATCH):
                origin = ReplayOrigin.decode(logged.message.replay_of)
                if origin is not None and origin.task_id == task.task_id:
                    if origin.offset >= task.summary.positions.get(origin.partition, 0):
                        sent.add((origin.partition, origin.offset))
        if sent:
            log.info(
                "replayed before the last runner stopped, skipped",
                extra={"task": task.task_id, "count": len(sent)},
            )
        return sent

    async def _send(
        self, task: ReplayTask, destination: QueueRecord, batch: list[LoggedMessage]
    ) -> None:
        if not batch:
            return
        messages = [self._replayed(task, destination, logged) for logged in batch]
        if is_fifo(destination):
            by_group: dict[str | None, list[StoredMessage]] = {}
            for message in messages:
                by_group.setdefault(message.message_group_id, []).append(message)

            async def send_group(group: list[StoredMessage]) -> None:
                for message in group:  # in log order, each after the last was stored
                    await self._fifo.send(destination, message)

            await asyncio.gather(*(send_group(group) for group in by_group.values()))
        else:
            for outcome in await self._messages.send_many(destination, messages):
                if isinstance(outcome, Exception):
                    raise outcome
        self._events.sent(destination, [(m, len(m.body)) for m in messages])

    def _replayed(
        self, task: ReplayTask, destination: QueueRecord, logged: LoggedMessage
    ) -> StoredMessage:
        # In clear: the send seals it again if the destination is encrypted.
        original = self._messages.encryption.open(logged.message)
        earlier = ReplayOrigin.decode(original.replay_of)  # a replay of a replay: the first
        origin = ReplayOrigin(
            task_id=task.task_id,
            partition=logged.partition,
            offset=logged.offset,
            message_id=earlier.message_id if earlier else original.message_id,
            sent_ms=earlier.sent_ms if earlier else original.sent_ms,
        )
        fifo = is_fifo(destination)
        return StoredMessage(
            message_id=str(uuid.uuid4()),
            body=original.body,
            sent_ms=self._clock.now_ms(),
            delay_s=0 if fifo else attribute_int(destination, "DelaySeconds"),
            attributes=original.attributes,
            sender_id=original.sender_id,
            aws_trace_header=original.aws_trace_header,
            message_group_id=original.message_group_id,
            deduplication_id=f"{task.task_id}-{logged.partition}-{logged.offset}" if fifo else None,
            deduplication_scope=destination.attributes.get("DeduplicationScope", "queue")
            if fifo
            else None,
            replay_of=origin.encode(),
        )

    async def _pause(self, task: ReplayTask, delay_s: float) -> None:
        wakers = [
            asyncio.ensure_future(task.cancel_requested.wait()),
            asyncio.ensure_future(self._closing.wait()),
        ]
        try:
            await asyncio.wait(wakers, timeout=delay_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waker in wakers:
                waker.cancel()

    @staticmethod
    def _fail(task: ReplayTask, reason: str, detail: str) -> None:
        task.summary.status = ReplayStatus.FAILED
        task.summary.failure_reason = reason
        log.warning(
            "message replay task failed",
            extra={"task": task.task_id, "reason": reason, "detail": detail},
        )


def read_view(reader: LogReader, topic: str, partitions: int) -> ranges.LogView:
    bounds = reader.bounds(topic, partitions)
    first: list[int | None] = []
    for partition, (start, end) in enumerate(bounds):
        if start >= end:
            first.append(None)
            continue
        records = reader.read_window(topic, partition, start, start + 1)
        first.append(records[0].message.sent_ms if records else None)
    return ranges.LogView(bounds, first)
