"""What every action handler receives besides its typed request."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from lease_store.value_class import value_class

if TYPE_CHECKING:
    from gateway.actions.runtime import Runtime
    from gateway.iam.principal import Principal
    from topology.catalog import QueueRecord


class Protocol(Enum):
    """The SQS wire protocol a request came in (docs/SQS-BEHAVIOUR.md, "Wire protocols")."""

    JSON = "json"
    QUERY = "query"


@dataclass(slots=True)
class RequestNotes:
    """What a handler tells the gateway about its request, for `/metrics`."""

    long_poll: bool = False  # a ReceiveMessage that was allowed to wait


@value_class
class RequestContext:
    runtime: Runtime
    protocol: Protocol
    base_url: str  # scheme://host[:port] the client called, or the configured base URL
    account_id: str
    region: str  # the SigV4 scope's, else the default region: which region's queues it sees
    sender_id: str
    request_id: str
    trace_header: str | None = None  # X-Amzn-Trace-Id
    notes: RequestNotes = field(default_factory=RequestNotes)
    principal: Principal | None = None  # who is calling (None only outside a request)

    @property
    def is_admin(self) -> bool:
        return self.principal is not None and self.principal.is_admin

    def owns(self, record: QueueRecord) -> bool:
        """Whether the caller belongs to the queue's account."""
        return record.account_id == self.account_id

    def queue(self, queue_url: str) -> QueueRecord:
        return self.runtime.registry.resolve(queue_url, self.account_id, self.region)

    def queue_url(self, record: QueueRecord) -> str:
        return f"{self.base_url}/{record.account_id}/{record.name}"

    def queue_arn(self, record: QueueRecord) -> str:
        return record.arn
