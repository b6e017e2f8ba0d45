"""A stack as KQS keeps it: one JSON document per stack (`__kqs_stacks`, `store.py`).

It holds what the API describes (status, parameters, outputs, tags), the template as given,
each resource's state (physical id, resolved properties, what `Fn::GetAtt` reads), the latest
events and the change sets. Times are epoch milliseconds; the API renders them as ISO 8601.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

# The events a stack keeps (newest); AWS keeps them all, but a record must stay small.
MAX_EVENTS = 400


@dataclass
class ResourceState:
    logical_id: str
    type: str
    status: str
    physical_id: str = ""
    reason: str = ""
    properties: dict[str, Any] = field(default_factory=dict)  # resolved
    attributes: dict[str, Any] = field(default_factory=dict)  # what Fn::GetAtt reads
    deletion_policy: str = "Delete"
    depends_on: list[str] = field(default_factory=list)
    updated_ms: int = 0


@dataclass
class StackEvent:
    event_id: str
    logical_id: str
    physical_id: str
    type: str
    status: str
    reason: str
    timestamp_ms: int
    properties: str = ""  # JSON of the properties, as AWS shows ResourceProperties
    client_request_token: str = ""


@dataclass
class ChangeSet:
    change_set_id: str
    name: str
    change_set_type: str  # CREATE | UPDATE
    status: str  # CREATE_PENDING | CREATE_COMPLETE | FAILED | DELETE_COMPLETE
    execution_status: str  # AVAILABLE | UNAVAILABLE | EXECUTE_COMPLETE | OBSOLETE
    status_reason: str
    template_body: str
    parameters: dict[str, str]
    capabilities: list[str]
    tags: dict[str, str]
    description: str
    created_ms: int
    changes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Stack:
    stack_id: str
    name: str
    region: str
    account_id: str
    status: str
    created_ms: int
    template_body: str = ""
    status_reason: str = ""
    description: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    notification_arns: list[str] = field(default_factory=list)
    disable_rollback: bool = False
    termination_protection: bool = False
    resources: dict[str, ResourceState] = field(default_factory=dict)
    outputs: list[dict[str, str]] = field(default_factory=list)
    events: list[StackEvent] = field(default_factory=list)
    change_sets: dict[str, ChangeSet] = field(default_factory=dict)
    updated_ms: int | None = None
    deleted_ms: int | None = None
    # The exports of other stacks this one's template imports (`Fn::ImportValue`): such an
    # export cannot be removed while this stack lives.
    imports: list[str] = field(default_factory=list)
    # The request that last changed the stack (`ClientRequestToken`), for its events.
    client_request_token: str = ""

    @property
    def deleted(self) -> bool:
        return self.status == "DELETE_COMPLETE"

    def add_event(self, event: StackEvent) -> None:
        self.events.append(event)
        del self.events[:-MAX_EVENTS]

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Stack:
        fields = json.loads(raw)
        fields["resources"] = {
            k: ResourceState(**v) for k, v in fields.get("resources", {}).items()
        }
        fields["events"] = [StackEvent(**e) for e in fields.get("events", [])]
        fields["change_sets"] = {
            k: ChangeSet(**v) for k, v in fields.get("change_sets", {}).items()
        }
        return cls(**fields)

    def copy(self) -> Stack:
        return Stack.decode(self.encode())
