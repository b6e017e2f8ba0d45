"""`__kqs_move_tasks`: the message move tasks, kept so that a task outlives its gateway.

The gateway running a source queue's tasks (its home, `gateway/sqs/move_tasks.py`) writes a
task's record when the task starts, at most once a second while it moves, when a cancel is
asked for and when it ends. One compacted record per task, key its task id, value JSON
`{"source_topic": <the source queue's topic>, "task": <MoveTaskSummary's fields>}`; a
tombstone once the task falls out of its queue's history. Every gateway reads the topic whole
at start and then follows it, so the gateway that becomes a source queue's home (after a
restart, or when the group gives it the queue's partition 0) lists the tasks the last home
listed and runs on those it left RUNNING.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from topology.admin import TopicAdmin
from topology.names import MOVE_TASKS_TOPIC
from topology.producer import AsyncProducer
from topology.topic_tail import TailRecord, TopicTail, read_to_end

log = logging.getLogger("kqs.move_task_log")

TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
# How long a new home waits to have read every record the topic holds (the last home's last
# words on its tasks) before it runs them on.
CATCH_UP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class LoggedTask:
    task_id: str
    source_topic: str
    fields: dict[str, object]  # MoveTaskSummary.encode(): decoded by gateway/sqs/move_tasks.py

    def encode(self) -> bytes:
        return json.dumps({"source_topic": self.source_topic, "task": self.fields}).encode()

    @classmethod
    def decode(cls, task_id: str, raw: bytes) -> LoggedTask:
        value = json.loads(raw)
        return cls(task_id, str(value["source_topic"]), dict(value["task"]))


class MoveTaskLog:
    """The tasks as this gateway knows them: read whole at start, then followed."""

    def __init__(
        self,
        bootstrap: str,
        admin: TopicAdmin,
        producer: AsyncProducer,
        topic: str = MOVE_TASKS_TOPIC,
    ) -> None:
        # `topic`: the message replay tasks (`__kqs_replay_tasks`) are kept the same way.
        self._bootstrap = bootstrap
        self._topic = topic
        self._admin = admin
        self._producer = producer
        self._tasks: dict[str, LoggedTask] = {}
        self._by_source: dict[str, dict[str, LoggedTask]] = {}  # source topic -> by task id
        # Offset each entry comes from: this gateway's own write, applied when acknowledged,
        # must not be replaced by an older record read back late.
        self._offsets: dict[str, int] = {}
        self.position = 0  # the next offset of the topic to read
        self._tail: TopicTail | None = None
        self._listeners: list[Callable[[LoggedTask], None]] = []

    async def ensure_topic(self) -> None:
        # Synced as the catalog is: a task's start is answered once its record is in Kafka.
        await self._admin.create_topic(self._topic, 1, self._admin.durable(TOPIC_CONFIG))

    def load(self, timeout_s: float = 30.0) -> None:
        """Read the topic to its current end (blocking; before `follow`)."""
        end = read_to_end(self._bootstrap, self._topic, self._apply, timeout_s)
        self.position = max(self.position, end)
        log.info("move tasks loaded", extra={"tasks": len(self._tasks)})

    def follow(self) -> TopicTail:
        """Follow the topic from where `load` ended (the other gateways' writes)."""
        self._tail = TopicTail(self._bootstrap, self._topic, self.position, self._apply)
        return self._tail

    async def caught_up(self) -> bool:
        """Wait (at most `CATCH_UP_TIMEOUT_S`) until every record in the topic now was read.
        At once when the log is not followed (one gateway: `load` read it whole, and this
        gateway's own writes are applied as they are acknowledged)."""
        if self._tail is None:
            return True
        (end,) = await self._admin.end_offsets(self._topic, 1)
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self.position < end:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def listen(self, on_read: Callable[[LoggedTask], None]) -> None:
        """Call `on_read` (on the event loop) with every task record `follow` reads from the
        topic, this gateway's own included, even one an entry written later here has already
        replaced: a request another gateway wrote (a cancel) is seen though the runner's
        next checkpoint overtook it."""
        self._listeners.append(on_read)

    def tasks_of(self, source_topic: str) -> list[LoggedTask]:
        """The tasks of one source queue incarnation (in no particular order)."""
        return list(self._by_source.get(source_topic, {}).values())

    def source_topics(self) -> set[str]:
        """The queue topics that have tasks in the log."""
        return {topic for topic, tasks in self._by_source.items() if tasks}

    async def write(self, task: LoggedTask) -> None:
        """Record the task's state now (acks=all, awaited). Produced before the first await,
        so a task's records land in the order they were written (a cancel's and the runner's
        last word can be on their way at once)."""
        delivered = await self._producer.send_soon(
            self._topic, task.encode(), key=task.task_id.encode()
        )
        self._set(task.task_id, delivered.offset, task)

    async def forget(self, task_id: str) -> None:
        delivered = await self._producer.send_soon(self._topic, None, key=task_id.encode())
        self._set(task_id, delivered.offset, None)

    def _apply(self, batch: list[TailRecord]) -> None:
        for offset, key, value in batch:
            self.position = max(self.position, offset + 1)
            task_id = key.decode()
            try:
                task = LoggedTask.decode(task_id, value) if value is not None else None
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable move task record skipped", extra={"offset": offset})
                continue
            self._set(task_id, offset, task)
            if task is not None and self._tail is not None:  # followed, on the event loop
                for listener in self._listeners:
                    listener(task)

    def _set(self, task_id: str, offset: int, task: LoggedTask | None) -> None:
        if offset <= self._offsets.get(task_id, -1):
            return
        self._offsets[task_id] = offset
        old = self._tasks.pop(task_id, None)
        if old is not None:
            self._by_source[old.source_topic].pop(task_id, None)
        if task is not None:
            self._tasks[task_id] = task
            self._by_source.setdefault(task.source_topic, {})[task_id] = task
