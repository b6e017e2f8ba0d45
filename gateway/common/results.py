"""Results that several rooms of the gateway hand each other: what a receive leased, what a
FIFO send answered, one gateway's share of a queue's gauges, and the lease facts a browse
reads. Here, below the rooms that
make and read them, so that none of those rooms imports another for a type.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from lease_store.records import LeaseFact
from lease_store.types import Counts, Delivery
from lease_store.value_class import value_class


@dataclass(frozen=True, slots=True)
class FifoSent:
    message_id: str
    sequence_number: str
    duplicate: bool  # answered from the deduplication window: nothing was enqueued


@value_class
class Received:
    """A message a receive leased: its delivery and the receipt handle issued for it (by
    this gateway, or by the one serving its partition)."""

    delivery: Delivery
    receipt_handle: str


@value_class
class QueueGaugeParts:
    """What one gateway knows of a queue's gauges: its partitions' counters and the oldest
    SentTimestamp among them (None: they hold no message)."""

    counts: Counts
    oldest_sent_ms: int | None

    def encode(self) -> list[int | None]:
        c = self.counts
        return [c.visible, c.in_flight, c.delayed, self.oldest_sent_ms]

    @classmethod
    def decode(cls, raw: list[int | None]) -> QueueGaugeParts:
        visible, in_flight, delayed, oldest_sent_ms = raw
        return cls(
            Counts(int(visible or 0), int(in_flight or 0), int(delayed or 0)), oldest_sent_ms
        )


@dataclass(frozen=True, slots=True)
class LeaseFacts:
    """What a browse reads of one partition's lease state (PeekMessages): the last offset
    applied to the lease store, and the fact of each offset asked (None: the store holds no
    message there, deleted or not yet applied)."""

    applied_offset: int
    facts: dict[int, LeaseFact | None]

    def encode(self) -> dict[str, Any]:
        return {
            "applied": self.applied_offset,
            "facts": {
                str(offset): None if fact is None else base64.b64encode(fact.encode()).decode()
                for offset, fact in self.facts.items()
            },
        }

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> LeaseFacts:
        return cls(
            int(raw["applied"]),
            {
                int(offset): None if fact is None else LeaseFact.decode(base64.b64decode(fact))
                for offset, fact in raw["facts"].items()
            },
        )
