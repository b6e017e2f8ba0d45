"""Pure lease transitions: (fact, event, now) -> new fact, or a typed error.

Theory of operation
-------------------
A message's lease is a handful of facts (`LeaseFact`): when it was sent, when it next becomes
visible, how often it was received, and when. Its SQS-facing state is derived, never stored:

* DELAYED   - never received and `visible_at_ms` is still in the future (DelaySeconds);
* IN_FLIGHT - received at least once and `visible_at_ms` is in the future (a live lease);
* VISIBLE   - `visible_at_ms` has passed: any receive may take it.

Events and the states they are legal in:

* Received          VISIBLE   -> IN_FLIGHT   (receive_count + 1, a new receipt epoch)
* VisibilityChanged IN_FLIGHT or VISIBLE -> IN_FLIGHT or VISIBLE (timeout 0), for a message
                    received at least once, with the handle of any of its receives (as AWS
                    answers: an expired lease, or a handle superseded by a later receive,
                    still changes the visibility), never past 12 h after the latest receive
* Deleted           any       -> gone        (any epoch of a valid handle may delete)
* Expired           any       -> gone        (older than the queue's retention period)
* DeadLettered      VISIBLE   -> gone        (a receive would exceed maxReceiveCount)

The receipt epoch is the receive count at the time of the receive: every receive produces a
new one, so an older handle is recognisably superseded (it may still delete the message and
change its visibility, as in SQS; it is authentic, which is what the epoch cannot forge).

Nothing here does I/O or reads a clock; `now_ms` is always passed in.
"""

from __future__ import annotations

from enum import Enum

from lease_store.errors import MessageNotAvailable, MessageNotInflight, VisibilityTooLong
from lease_store.records import LeaseFact, StoredMessage

MAX_LEASE_SPAN_MS = 12 * 60 * 60 * 1000


class MessageState(Enum):
    DELAYED = "delayed"
    VISIBLE = "visible"
    IN_FLIGHT = "in_flight"


def state_at(fact: LeaseFact, at_ms: int) -> MessageState:
    """The SQS-facing state of a message at time `at_ms`."""
    if fact.visible_at_ms <= at_ms:
        return MessageState.VISIBLE
    return MessageState.IN_FLIGHT if fact.receive_count > 0 else MessageState.DELAYED


def new_fact(
    sent_ms: int, delay_ms: int, receive_count: int = 0, first_receive_ms: int = 0
) -> LeaseFact:
    """The lease of a freshly ingested message (the counts: carried by a dead-letter move)."""
    return LeaseFact(
        sent_ms=sent_ms,
        visible_at_ms=sent_ms + delay_ms,
        receive_count=receive_count,
        first_receive_ms=first_receive_ms,
    )


def ingested_fact(message: StoredMessage) -> LeaseFact:
    """The lease of a message read from its queue topic: all of it follows from the record."""
    return new_fact(
        message.sent_ms, message.delay_s * 1000, message.receive_count, message.first_receive_ms
    )


def receive(fact: LeaseFact, now_ms: int, visibility_ms: int) -> LeaseFact:
    """Lease a visible message for `visibility_ms`."""
    if state_at(fact, now_ms) is not MessageState.VISIBLE:
        raise MessageNotAvailable("message is not visible")
    return LeaseFact(
        fact.sent_ms,
        now_ms + visibility_ms,
        fact.receive_count + 1,
        fact.first_receive_ms or now_ms,
        now_ms,
    )


def change_visibility(
    fact: LeaseFact, receipt_epoch: int, now_ms: int, visibility_ms: int
) -> LeaseFact:
    """Restart the lease so that the message becomes visible `visibility_ms` from now.

    Any receive's handle will do, and the current lease may have ended: AWS accepts both
    (a message whose visibility timeout passed, nobody having received it since, is hidden
    again; a first receive's handle still works after a second receive).
    """
    if receipt_epoch > fact.receive_count:
        raise MessageNotAvailable("receipt handle of a receive this message never had")
    if fact.receive_count == 0:
        raise MessageNotInflight("message was never received")
    if now_ms + visibility_ms - fact.last_receive_ms > MAX_LEASE_SPAN_MS:
        raise VisibilityTooLong("total visibility timeout would exceed 12 hours")
    return fact.with_visible_at(now_ms + visibility_ms)


def is_expired(fact: LeaseFact, now_ms: int, retention_ms: int) -> bool:
    """True when the message outlived the queue's MessageRetentionPeriod."""
    return fact.sent_ms + retention_ms <= now_ms


def exceeds_max_receives(fact: LeaseFact, max_receive_count: int | None) -> bool:
    """True when one more receive would pass the RedrivePolicy's maxReceiveCount."""
    return max_receive_count is not None and fact.receive_count + 1 > max_receive_count
