"""The long-lived parts a gateway runs with, assembled once in `app.py`."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import Settings
from gateway.events import EventSink
from gateway.messages import MessageService
from gateway.move_tasks import MoveTasks
from gateway.queues import QueueRegistry
from lease_store.clock import Clock


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    clock: Clock
    registry: QueueRegistry
    messages: MessageService
    move_tasks: MoveTasks
    events: EventSink
