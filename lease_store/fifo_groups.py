"""Which FIFO message groups a receive may take from, and in which order: the pure rules.

As AWS serves a FIFO queue (recorded against AWS by LocalStack's `test_fifo_*` tests, and
the issue that brought these rules, KQS issue 54):

* **A group is available when its oldest undeleted message is visible.** Visibility is per
  message: a receive takes the group's messages in order up to the first one that is not
  visible (in flight, or held for a dead-letter move), then goes on to the next available
  group in the same call. So ending or shortening one message's lease (ChangeMessageVisibility
  to 0) makes that message, and so its group, available again while the group's later
  messages stay in flight; extending one hides it and every later message of its group, not
  the earlier ones; a receive with VisibilityTimeout 0 leaves the group available.
* **Available groups are served in the order they became available.** A group became
  available when its oldest message did: at its send (plus the queue's delay) for a message
  never received, at the end of its last lease for one that came back from flight. So a
  group whose message returns from flight queues behind groups already waiting, and a group
  whose earlier messages were deleted keeps the place its next message's send gave it. Ties
  (one millisecond) go to a message never received, then to the lower offset.

A receive reads a partition's visible messages in log order, a page at a time, so it sees
the groups whose oldest message is among the first ones read. Messages never received become
available in log order (as they were sent), so every group not yet seen became available no
earlier than the last never-received message read, the *frontier*: the groups seen that
became available before it are *settled*, in their final order. The scan stops once settled
groups fill the receive (or past `ORDER_WINDOW` messages, or at the end). Beyond that window
the order is approximate: a group returning from flight is served before a waiting group
whose oldest message lies deeper than the window.

Nothing here does I/O or reads a clock: the lease store hands in the facts it read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lease_store.records import LeaseFact

# Messages of a partition read, at most, to put its groups in the order AWS serves them. A
# receive reads past the first page only while a group back from flight is among those met,
# ahead of messages sent before its return (bench/fifo_group_order.py,
# bench/results/archive/2026-12-02-fifo-group-order.md).
ORDER_WINDOW = 256

AvailableSince = tuple[int, int, int]
"""When a group became available, as an order: (ms, 1 if its message returned from flight
else 0, offset of that message)."""

SinceOf = Callable[[int], AvailableSince]
"""When the visible message at an offset became visible (the lease store reads its fact)."""


def available_since(offset: int, fact: LeaseFact) -> AvailableSince:
    """When the message at `offset`, visible now, became visible (see the module header)."""
    return (fact.visible_at_ms, 1 if fact.receive_count > 0 else 0, offset)


@dataclass(slots=True)
class GroupRun:
    """What a receive found of one group: the visible messages it may take, in log order.

    `hidden` are the group's offsets out of sight (ascending) that the receive knows of;
    `returned` whether its oldest visible message came back from flight (it was received
    before); `since` when the group became available, once asked (`available_since`).
    """

    group: str
    hidden: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    returned: bool = False
    blocked: bool = False
    since: AvailableSince | None = None

    @property
    def hidden_from(self) -> int | None:
        """The group's lowest offset out of sight: nothing from it on may be taken."""
        return self.hidden[0] if self.hidden else None

    @property
    def available(self) -> bool:
        return bool(self.offsets)

    def offer(self, offset: int, returned: bool = False) -> bool:
        """A visible message of the group, read in log order; returns whether it may be
        taken (before the first hidden one). The first one offered is the group's oldest
        visible message: if a hidden one precedes it, the group is not available at all."""
        if self.blocked:
            return False
        if head_hidden(self.hidden_from, offset):
            self.blocked = not self.offsets
            return False  # behind an in-flight message: hidden with it
        if not self.offsets:
            self.returned = returned
        self.offsets.append(offset)
        return True

    def available_since(self, since_of: SinceOf) -> AvailableSince:
        if self.since is None:
            self.since = since_of(self.offsets[0])
        return self.since


def head_hidden(hidden_from: int | None, offset: int) -> bool:
    """Whether a group's message at `offset` waits for a hidden one before it."""
    return hidden_from is not None and hidden_from < offset


def settled_count(runs: Iterable[GroupRun], frontier: AvailableSince, since_of: SinceOf) -> int:
    """How many messages the settled groups (available no later than `frontier`) hold."""
    return sum(
        len(run.offsets)
        for run in runs
        if run.available and run.available_since(since_of) <= frontier
    )


def serving_order(runs: Iterable[GroupRun], since_of: SinceOf) -> list[GroupRun]:
    """The available groups, in the order they became available.

    While none came back from flight, that is the order of their oldest messages in the log
    (messages never received became available as they were sent), and no fact is read."""
    available = [run for run in runs if run.available]
    if any(run.returned for run in available):
        available.sort(key=lambda run: run.available_since(since_of))
    else:
        available.sort(key=lambda run: run.offsets[0])
    return available
