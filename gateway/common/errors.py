"""SQS errors, and the one table that maps domain errors onto them.

Each error class carries the Query error code (also sent to JSON clients in the
`x-amzn-query-error` header, which botocore turns into `Error.Code`), the JSON `__type` shape,
the HTTP status and whether the sender is at fault. Rendering lives in `protocol.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lease_store import errors as lease_errors

if TYPE_CHECKING:
    from topology.owners import Owner


class SqsError(Exception):
    code: str = "InternalError"
    json_type: str = "InternalError"
    http_status: int = 500
    sender_fault: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def message_for(self, query: bool) -> str:
        """The message text, which for a few errors differs between the protocols."""
        return self.message


class _SenderError(SqsError):
    http_status = 400
    sender_fault = True


class QueueDoesNotExist(_SenderError):
    code = "AWS.SimpleQueueService.NonExistentQueue"
    json_type = "QueueDoesNotExist"

    def __init__(self) -> None:
        super().__init__("The specified queue does not exist.")

    def message_for(self, query: bool) -> str:
        return (
            "The specified queue does not exist for this wsdl version." if query else self.message
        )


class QueueNameExists(_SenderError):
    code = "QueueAlreadyExists"
    json_type = "QueueNameExists"


class QueueDeletedRecently(_SenderError):
    code = "AWS.SimpleQueueService.QueueDeletedRecently"
    json_type = "QueueDeletedRecently"


class InvalidParameterValue(_SenderError):
    code = "InvalidParameterValue"
    json_type = "InvalidParameterValueException"


class MissingParameter(_SenderError):
    code = "MissingParameter"
    json_type = "MissingRequiredParameterException"

    @classmethod
    def named(cls, name: str) -> MissingParameter:
        return cls(f"The request must contain the parameter {name}.")


class InvalidAttributeName(_SenderError):
    code = "InvalidAttributeName"
    json_type = "InvalidAttributeName"


class InvalidAttributeValue(_SenderError):
    code = "InvalidAttributeValue"
    json_type = "InvalidAttributeValue"


class InvalidAction(_SenderError):
    code = "InvalidAction"
    json_type = "UnknownOperationException"


class MissingAction(_SenderError):
    code = "MissingAction"
    json_type = "MissingAction"


class UnknownOperation(_SenderError):
    """A Query request to a queue URL that names no action (AWS answers 404 and no message)."""

    code = "UnknownOperationException"
    json_type = "UnknownOperationException"
    http_status = 404

    def __init__(self) -> None:
        super().__init__("")


class RequestTooLarge(_SenderError):
    """A request body beyond what the gateway reads (`gateway.common.limits.MAX_REQUEST_BYTES`)."""

    code = "RequestEntityTooLarge"
    json_type = "RequestEntityTooLarge"
    http_status = 413


class UnsupportedOperation(_SenderError):
    code = "AWS.SimpleQueueService.UnsupportedOperation"
    json_type = "UnsupportedOperation"


class ReceiptHandleIsInvalid(_SenderError):
    code = "ReceiptHandleIsInvalid"
    json_type = "ReceiptHandleIsInvalid"

    @classmethod
    def for_handle(cls, handle: str) -> ReceiptHandleIsInvalid:
        return cls(f'The input receipt handle "{handle}" is not a valid receipt handle.')


class MessageNotInflight(_SenderError):
    code = "AWS.SimpleQueueService.MessageNotInflight"
    json_type = "MessageNotInflight"


class InvalidMessageContents(_SenderError):
    code = "InvalidMessageContents"
    json_type = "InvalidMessageContents"


class OverLimit(_SenderError):
    code = "OverLimit"
    json_type = "OverLimit"
    http_status = 403


class PurgeQueueInProgress(_SenderError):
    code = "AWS.SimpleQueueService.PurgeQueueInProgress"
    json_type = "PurgeQueueInProgress"
    http_status = 403


class ResourceNotFound(_SenderError):
    """A message move task, or a queue named by ARN in a move-task request, does not exist."""

    code = "ResourceNotFoundException"
    json_type = "ResourceNotFoundException"
    http_status = 404


class KmsNotFound(_SenderError):
    """A message encrypted under a master key this gateway does not hold (or, at
    CreateQueue/SetQueueAttributes, a KmsMasterKeyId with no key provider configured)."""

    code = "KMS.NotFoundException"  # the SQS model's awsQueryError code
    json_type = "KmsNotFound"


# KMS's refusals when an external KMS holds a queue's master key (`topology/encryption/kms.py`),
# as SQS answers SendMessage/ReceiveMessage with them: the codes and statuses of the SQS model's
# awsQueryError traits (as the AWS SDK for JavaScript v3's schema carries them; botocore 1.34's
# model in the test venv has the shapes without their Query codes).


class KmsAccessDenied(_SenderError):
    code = "KMS.AccessDeniedException"
    json_type = "KmsAccessDenied"


class KmsDisabled(_SenderError):
    code = "KMS.DisabledException"
    json_type = "KmsDisabled"


class KmsInvalidState(_SenderError):
    code = "KMS.InvalidStateException"
    json_type = "KmsInvalidState"


class KmsInvalidKeyUsage(_SenderError):
    code = "KMS.InvalidKeyUsageException"
    json_type = "KmsInvalidKeyUsage"


class KmsThrottled(_SenderError):
    code = "KMS.ThrottlingException"
    json_type = "KmsThrottled"


class KmsOptInRequired(_SenderError):
    code = "KMS.OptInRequired"
    json_type = "KmsOptInRequired"
    http_status = 403


class EmptyBatchRequest(_SenderError):
    code = "AWS.SimpleQueueService.EmptyBatchRequest"
    json_type = "EmptyBatchRequest"


class TooManyEntriesInBatchRequest(_SenderError):
    code = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
    json_type = "TooManyEntriesInBatchRequest"


class BatchEntryIdsNotDistinct(_SenderError):
    code = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    json_type = "BatchEntryIdsNotDistinct"


class InvalidBatchEntryId(_SenderError):
    code = "AWS.SimpleQueueService.InvalidBatchEntryId"
    json_type = "InvalidBatchEntryId"


class BatchRequestTooLong(_SenderError):
    code = "AWS.SimpleQueueService.BatchRequestTooLong"
    json_type = "BatchRequestTooLong"


class _AuthError(SqsError):
    """Authentication and authorization: the AWS-wide codes, the same in both protocols."""

    http_status = 403
    sender_fault = True


class MissingAuthenticationToken(_AuthError):
    code = "MissingAuthenticationToken"
    json_type = "MissingAuthenticationToken"

    def __init__(self) -> None:
        super().__init__(
            "The request must contain either a valid (registered) AWS access key ID or X.509 "
            "certificate."
        )


class InvalidClientTokenId(_AuthError):
    code = "InvalidClientTokenId"
    json_type = "InvalidClientTokenId"


class SignatureDoesNotMatch(_AuthError):
    code = "SignatureDoesNotMatch"
    json_type = "SignatureDoesNotMatch"


class IncompleteSignature(_AuthError):
    code = "IncompleteSignature"
    json_type = "IncompleteSignature"
    http_status = 400


class RequestExpired(_AuthError):
    code = "RequestExpired"
    json_type = "RequestExpired"
    http_status = 400


class AccessDenied(_AuthError):
    code = "AccessDenied"
    json_type = "AccessDeniedException"

    @classmethod
    def to(cls, resource_url: str) -> AccessDenied:
        return cls(f"Access to the resource {resource_url} is denied.")


class InternalError(SqsError):
    code = "InternalError"
    json_type = "InternalError"
    http_status = 500


class ServiceUnavailable(SqsError):
    code = "ServiceUnavailable"
    json_type = "ServiceUnavailable"
    http_status = 503


class OwnerGone(ServiceUnavailable):
    """The gateway that served a partition let it go, or could not be reached, before a
    request about the partition was done there: nothing says the request failed on its own
    merits, so the partition's next owner may take it (see `MessageService.until_moved`).

    `owner`: the gateway gone (None: this one, which lost the partition while it confirmed
    a change). An owner's own `OwnerGone` travels back by class name like any SQS error.
    `removed`: the MessageId a delete removed before its gateway learned the partition had
    moved, which it therefore did not count as deleted (`MessageService.delete_many`).
    """

    owner: Owner | None = None  # also when decoded from an owner's answer
    removed: str | None = None

    def __init__(self, message: str, owner: Owner | None = None) -> None:
        super().__init__(message)
        self.owner = owner


_NOT_AVAILABLE = "Message does not exist or is not available for visibility timeout change."


def for_domain_error(error: lease_errors.LeaseError) -> SqsError:
    """The SQS error a lease-store error becomes."""
    if isinstance(error, lease_errors.ReceiptHandleInvalid):
        return ReceiptHandleIsInvalid.for_handle(error.handle)
    if isinstance(error, lease_errors.MessageNotInflight):
        return MessageNotInflight("Message is not in flight.")
    if isinstance(error, lease_errors.VisibilityTooLong):
        return InvalidParameterValue(
            "Value for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout "
            "for the message is beyond the limit [43200 seconds]"
        )
    if isinstance(error, lease_errors.MessageNotAvailable):
        return InvalidParameterValue(_NOT_AVAILABLE)
    return InternalError("We encountered an internal error. Please try again.")
