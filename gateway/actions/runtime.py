"""The long-lived parts a gateway runs with, assembled once in `app.py`."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.common.config import Settings
from gateway.observability.events import EventSink
from gateway.sqs.fifo import FifoService
from gateway.sqs.messages.service import MessageService
from gateway.sqs.move_tasks import MoveTasks
from gateway.sqs.queues import QueueRegistry
from gateway.sqs.replay.browse import Browser
from gateway.sqs.replay.tasks import ReplayTasks
from lease_store.clock import Clock


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    clock: Clock
    registry: QueueRegistry
    messages: MessageService
    fifo: FifoService
    move_tasks: MoveTasks
    events: EventSink
    replay_tasks: ReplayTasks
    browser: Browser
