"""The lease store's values: a partition's state, the counts, what a receive took, the write
batch that notes the lease facts it changes, and the listener told of each commit.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from lease_store.keys import PartitionKey
from lease_store.kv import WriteBatch
from lease_store.records import LeaseFact, StoredMessage
from lease_store.value_class import value_class

_STATE = struct.Struct(">qqqqqq")
_GROUPED = struct.Struct(">q")  # appended after `_STATE`; states written before it lack it


@dataclass(slots=True)
class PartitionState:
    applied_offset: int = -1
    swept_until_ms: int = 0
    # A snapshot of the counts as of the last commit, for tools reading the stored state; the
    # store counts them again from the facts when it loads the partition.
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0
    purged_before_offset: int = 0
    # Whether a record with a MessageGroupId was ever stored here: a standard queue's
    # partition that has one is fair (groups take turns, `LeaseStore.receive_fair`). Set
    # by ingest and by a rebuild's replay, so it survives a restart and moves with the
    # partition.
    grouped: bool = False

    def encode(self, applied_offset: int | None = None) -> bytes:
        """`applied_offset`: written instead of the applied offset (see core.py's `_state_bytes`)."""
        return _STATE.pack(
            self.applied_offset if applied_offset is None else applied_offset,
            self.swept_until_ms,
            self.visible,
            self.in_flight,
            self.delayed,
            self.purged_before_offset,
        ) + _GROUPED.pack(int(self.grouped))

    @classmethod
    def decode(cls, raw: bytes) -> PartitionState:
        st = cls(*_STATE.unpack_from(raw))
        if len(raw) >= _STATE.size + _GROUPED.size:
            st.grouped = bool(_GROUPED.unpack_from(raw, _STATE.size)[0])
        return st


@value_class
class Counts:
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.visible + other.visible,
            self.in_flight + other.in_flight,
            self.delayed + other.delayed,
        )


@value_class
class Delivery:
    """A message taken by a receive: its offset, its lease after the receive, its content."""

    offset: int
    fact: LeaseFact
    message: StoredMessage


@dataclass(slots=True)
class ReceiveOutcome:
    delivered: list[Delivery] = field(default_factory=list)
    # Messages that would pass maxReceiveCount: held back (not counted as received) until the
    # caller has moved them to the dead-letter queue and calls `remove`.
    dead_letter: list[Delivery] = field(default_factory=list)
    expired: int = 0
    expired_ids: list[str] = field(default_factory=list)  # their message ids


@dataclass
class _Batch(WriteBatch):
    """A write batch of one partition that also notes the lease facts it changes (offset ->
    the fact as encoded, or None when removed) for the commit listener, which otherwise
    had to find them again among the batch's keys (a parse of every key, each commit).

    The per-message paths (ingest, a lease, a removal) write `ops` directly (None: a delete)
    rather than through `put` and `delete`: a method call per key was ~7 of the ~200 Python
    calls of a message's life."""

    facts: dict[int, bytes | None] = field(default_factory=dict)


# Called after every committed write with the lease facts it changed (offset -> the new fact
# as `LeaseFact.encode` wrote it, or None when removed: the changelog publishes these bytes
# as they are) and the partition state as written. Facts that ingest creates are not
# reported (the queue-topic record determines them), nor are the facts a purge drops (its
# watermark, in the state, covers them). The lease changelog (`topology/changelog.py`) listens.
CommitListener = Callable[[PartitionKey, dict[int, bytes | None], PartitionState], None]
