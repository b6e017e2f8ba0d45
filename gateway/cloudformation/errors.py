"""CloudFormation's errors, as its awsQuery API answers them (`wire.render_error`).

Nearly everything CloudFormation refuses is `ValidationError` (400): a template that does not
parse, a stack that does not exist, a stack in a state that forbids the action, "No updates are
to be performed.". The codes are those of botocore's model (`cloudformation/2010-05-15`).
"""

from __future__ import annotations


class CloudFormationError(Exception):
    code = "ValidationError"
    http_status = 400
    sender_fault = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ValidationError(CloudFormationError):
    """The request, its template or the stack's state forbids what was asked."""


class AlreadyExists(CloudFormationError):
    """CreateStack of a name an existing (not deleted) stack has."""

    code = "AlreadyExistsException"


class ChangeSetNotFound(CloudFormationError):
    code = "ChangeSetNotFound"
    http_status = 404


class InvalidChangeSetStatus(CloudFormationError):
    code = "InvalidChangeSetStatus"


class AccessDenied(CloudFormationError):
    code = "AccessDenied"
    http_status = 403


class InvalidAction(CloudFormationError):
    code = "InvalidAction"


class TemplateError(ValidationError):
    """The template cannot be used; the message starts as AWS's do."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Template format error: {detail}")


class ResourceFailed(Exception):
    """A resource handler could not do its part; `reason` goes to the resource's event."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
