"""AddPermission and RemovePermission as edits of the queue's Policy document.

AddPermission appends one statement whose `Sid` is the label: Allow, the listed accounts
as principals (`arn:aws:iam::<id>:root`), the listed actions as `SQS:<Action>`, and the
queue's ARN as resource. RemovePermission drops the statement with that label; a policy
left without statements is removed. Both keep any statements written by hand
(SetQueueAttributes) as they are.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.common.errors import InvalidParameterValue, MissingParameter, OverLimit
from gateway.iam.policy import Policy, PolicyError

MAX_ACTIONS = 7
MAX_STATEMENTS = 20
SHAREABLE_ACTIONS = frozenset(
    {
        "*",
        "SendMessage",
        "ReceiveMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "GetQueueAttributes",
        "GetQueueUrl",
        "ListDeadLetterSourceQueues",
        "PurgeQueue",
    }
)
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_ACCOUNT_ID = re.compile(r"^\d{12}$")


def validate_label(label: str) -> None:
    if not _LABEL.match(label):
        raise InvalidParameterValue(
            f"Value {label} for parameter Label is invalid. Reason: Can only include "
            "alphanumeric characters, hyphens, or underscores. 1 to 80 in length."
        )


def add_permission(
    policy_text: str | None,
    queue_arn: str,
    label: str,
    account_ids: list[str],
    actions: list[str],
) -> str:
    """The queue's new Policy text with the permission `label` added."""
    validate_label(label)
    if not account_ids:
        raise MissingParameter.named("AWSAccountIds")
    if not actions:
        raise MissingParameter.named("Actions")
    if len(actions) > MAX_ACTIONS:
        raise OverLimit(f"{len(actions)} Actions were found, maximum allowed is {MAX_ACTIONS}.")
    for action in actions:
        if action not in SHAREABLE_ACTIONS:
            raise InvalidParameterValue(
                f"Value SQS:{action} for parameter ActionName is invalid. Reason: Only the "
                "queue owner is allowed to invoke this action."
            )
    invalid = [a for a in account_ids if not _ACCOUNT_ID.match(a)]
    if invalid:
        raise InvalidParameterValue(
            f"Value {invalid} for parameter PrincipalId is invalid. Reason: Unable to verify."
        )
    document = _document(policy_text, queue_arn)
    statements: list[Any] = document["Statement"]
    if any(isinstance(s, dict) and s.get("Sid") == label for s in statements):
        raise InvalidParameterValue(
            f"Value {label} for parameter Label is invalid. Reason: Already exists."
        )
    if len(statements) >= MAX_STATEMENTS:
        raise OverLimit(
            f"The queue policy already has {MAX_STATEMENTS} statements, the maximum allowed."
        )
    principals = [f"arn:aws:iam::{a}:root" for a in dict.fromkeys(account_ids)]
    granted = [f"SQS:{a}" for a in dict.fromkeys(actions)]
    statements.append(
        {
            "Sid": label,
            "Effect": "Allow",
            "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
            "Action": granted[0] if len(granted) == 1 else granted,
            "Resource": queue_arn,
        }
    )
    return json.dumps(document, separators=(",", ":"))


def remove_permission(policy_text: str | None, label: str) -> str:
    """The queue's new Policy text without `label` ("" when no statement is left)."""
    # AWS's text, as LocalStack recorded it against AWS (test_sqs_permission_lifecycle);
    # moto's "... can't find label on existing policy." is not what AWS answers.
    missing = InvalidParameterValue(
        f"Value {label} for parameter Label is invalid. Reason: can't find label."
    )
    if not policy_text:
        raise missing
    document = _document(policy_text, "")
    kept = [s for s in document["Statement"] if not (isinstance(s, dict) and s.get("Sid") == label)]
    if len(kept) == len(document["Statement"]):
        raise missing
    if not kept:
        return ""
    document["Statement"] = kept
    return json.dumps(document, separators=(",", ":"))


def _document(policy_text: str | None, queue_arn: str) -> dict[str, Any]:
    if not policy_text:
        # SQS writes the policy it generates in the 2008-10-17 version of the language.
        return {"Version": "2008-10-17", "Id": f"{queue_arn}/SQSDefaultPolicy", "Statement": []}
    try:
        Policy.parse(policy_text)
    except PolicyError:
        raise InvalidParameterValue(
            "The queue's Policy attribute is not a valid policy; fix it with SetQueueAttributes."
        ) from None
    document: dict[str, Any] = json.loads(policy_text)
    statements = document.get("Statement")
    document["Statement"] = [statements] if isinstance(statements, dict) else list(statements or [])
    return document
