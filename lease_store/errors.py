"""Domain errors of the lease store. They carry no HTTP or SQS codes; the gateway maps them."""

from __future__ import annotations


class LeaseError(Exception):
    """Base class of every lease-store error."""


class ReceiptHandleInvalid(LeaseError):
    """The receipt handle is malformed, forged, or belongs to another queue incarnation."""

    def __init__(self, handle: str) -> None:
        super().__init__(handle)
        self.handle = handle


class MessageNotAvailable(LeaseError):
    """The message was deleted, or the handle is older than the message's latest receive."""


class MessageNotInflight(LeaseError):
    """A visibility change was asked for a message that is not currently leased."""


class VisibilityTooLong(LeaseError):
    """A visibility change would keep the message hidden more than 12 hours after its receive."""
