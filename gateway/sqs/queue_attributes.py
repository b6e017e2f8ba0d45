"""Queue attributes: which exist, their defaults, and validation of the settable ones.

Values are kept as SQS sends them, strings, in the catalog. Cross-queue checks (a
RedrivePolicy's target must exist) need the registry and live in `queues.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from gateway.common import limits
from gateway.common.errors import (
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
)
from gateway.iam.policy import Policy, PolicyError

DEFAULTS: dict[str, str] = {
    "DelaySeconds": "0",
    "MaximumMessageSize": str(limits.MAX_MESSAGE_BYTES),
    "MessageRetentionPeriod": str(limits.DEFAULT_RETENTION_S),
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": str(limits.DEFAULT_VISIBILITY_TIMEOUT_S),
    "SqsManagedSseEnabled": "true",
}

COUNTERS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
READ_ONLY = (*COUNTERS, "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn")
# What a FIFO queue has and a standard queue does not: asked of (or set on) a standard queue,
# each is `InvalidAttributeName` "Unknown Attribute <name>.", as in SQS.
FIFO_DEFAULTS: dict[str, str] = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
FIFO_ONLY = tuple(FIFO_DEFAULTS)


def _int_range(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return low <= int(value) <= high and value.strip() == value
        except ValueError:
            return False

    return check


def _boolean(value: str) -> bool:
    return value.lower() in ("true", "false")


def _json_object(value: str) -> bool:
    if value == "":
        return True  # an empty value removes the attribute
    try:
        return isinstance(json.loads(value), dict)
    except ValueError:
        return False


def _queue_policy(value: str) -> bool:
    """An access policy of at most 8192 bytes and 20 statements with unique Sids ("" removes)."""
    if value == "":
        return True
    if len(value.encode()) > limits.MAX_POLICY_BYTES:
        return False
    try:
        policy = Policy.parse(value)
    except PolicyError:
        return False
    sids = [s.sid for s in policy.statements if s.sid is not None]
    return len(policy.statements) <= limits.MAX_POLICY_STATEMENTS and len(sids) == len(set(sids))


def _any(value: str) -> bool:
    return True


def _one_of(*allowed: str) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return value in allowed

    return check


def _true(value: str) -> bool:
    """FifoQueue: a FIFO queue says true; a standard queue has no such attribute."""
    return value.lower() == "true"


_VALIDATORS: dict[str, Callable[[str], bool]] = {
    "DelaySeconds": _int_range(0, limits.MAX_DELAY_S),
    "MaximumMessageSize": _int_range(limits.MIN_MESSAGE_BYTES_SETTING, limits.MAX_MESSAGE_BYTES),
    "MessageRetentionPeriod": _int_range(limits.MIN_RETENTION_S, limits.MAX_RETENTION_S),
    "ReceiveMessageWaitTimeSeconds": _int_range(0, limits.MAX_WAIT_TIME_S),
    "VisibilityTimeout": _int_range(0, limits.MAX_VISIBILITY_TIMEOUT_S),
    "Policy": _queue_policy,
    "RedrivePolicy": _json_object,
    "RedriveAllowPolicy": _json_object,
    "KmsMasterKeyId": _any,
    "KmsDataKeyReusePeriodSeconds": _int_range(60, 86_400),
    "SqsManagedSseEnabled": _boolean,
}

_FIFO_VALIDATORS: dict[str, Callable[[str], bool]] = {
    "FifoQueue": _true,
    "ContentBasedDeduplication": _boolean,
    "DeduplicationScope": _one_of("queue", "messageGroup"),
    "FifoThroughputLimit": _one_of("perQueue", "perMessageGroupId"),
}

SETTABLE = tuple(_VALIDATORS)
ALL_NAMES = (*SETTABLE, *READ_ONLY)
FIFO_ALL_NAMES = (*ALL_NAMES, *FIFO_ONLY)


FIFO_SUFFIX = ".fifo"


def is_fifo_name(name: str) -> bool:
    return name.endswith(FIFO_SUFFIX)


def fifo_only_message(name: str) -> str:
    """What SQS answers when a standard queue is given a FIFO attribute to set.

    As AWS users report it from CreateQueue and SetQueueAttributes (CloudFormation and
    Terraform logs, cdkd's notes): the two throughput settings name FifoQueue; the others
    are simply unknown.
    """
    if name in ("DeduplicationScope", "FifoThroughputLimit"):
        return f"You can specify the {name} only when FifoQueue is set to true."
    return f"Unknown Attribute {name}."


def validate_settable(attributes: dict[str, str], fifo: bool = False) -> dict[str, str]:
    """Check names and value formats; returns the attributes normalised (booleans lower-case).

    `fifo`: whether the queue is (or, at CreateQueue, asks to be) a FIFO queue; only a FIFO
    queue knows the FIFO attributes.
    """
    out: dict[str, str] = {}
    if (
        attributes.get("KmsMasterKeyId")
        and attributes.get("SqsManagedSseEnabled", "").lower() == "true"
    ):
        raise InvalidAttributeName(
            "You can use one type of server-side encryption (SSE) at one time. You can either "
            "enable KMS SSE or SQS SSE."
        )
    for name, value in attributes.items():
        if name in FIFO_ONLY and not fifo:
            raise InvalidAttributeName(fifo_only_message(name))
        validator = _VALIDATORS.get(name) or _FIFO_VALIDATORS.get(name)
        if validator is None:
            raise InvalidAttributeName(f"Unknown Attribute {name}.")
        if validator is _true and value.lower() == "false":
            # A FIFO queue stays one (the text is AWS's, as LocalStack and YDB's SQS answer it)
            raise InvalidAttributeValue(
                "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is "
                "not supported."
            )
        if not validator(value):
            raise InvalidAttributeValue(f"Invalid value for the parameter {name}.")
        if validator is _boolean or validator is _true:
            value = value.lower()
        elif name == "RedrivePolicy":
            value = normalize_redrive_policy(value)
        out[name] = value
    return out


def normalize_redrive_policy(value: str) -> str:
    """The RedrivePolicy as SQS returns it: compact JSON with maxReceiveCount a number.

    Clients send maxReceiveCount as a number or a string; SQS stores a number either way. A
    value that is not an integer is left as given, for the redrive check to refuse.
    """
    if value == "":
        return value
    policy = json.loads(value)
    count = policy.get("maxReceiveCount")
    if isinstance(count, str) and count.strip().isdigit():
        policy["maxReceiveCount"] = int(count)
    elif not isinstance(count, int) or isinstance(count, bool):
        return value
    ordered = {
        "deadLetterTargetArn": policy.pop("deadLetterTargetArn", None),
        "maxReceiveCount": policy.pop("maxReceiveCount"),
        **policy,
    }
    return json.dumps(ordered, separators=(",", ":"))


REDRIVE_PERMISSIONS = ("allowAll", "denyAll", "byQueue")


def validate_redrive_allow_policy(value: str) -> None:
    """A RedriveAllowPolicy names a redrivePermission, and 1-10 sourceQueueArns for byQueue.

    Raises InvalidParameterValue. An empty value (which removes the policy) is valid.
    """
    if value == "":
        return
    policy = json.loads(value)
    permission = policy.get("redrivePermission")
    sources = policy.get("sourceQueueArns")

    def invalid(reason: str) -> InvalidParameterValue:
        return InvalidParameterValue(
            f"Value {value} for parameter RedriveAllowPolicy is invalid. Reason: {reason}"
        )

    if permission not in REDRIVE_PERMISSIONS:
        raise invalid("redrivePermission must be allowAll, denyAll or byQueue.")
    if permission != "byQueue":
        if sources is not None:
            raise invalid("sourceQueueArns can be given only when redrivePermission is byQueue.")
        return
    if (
        not isinstance(sources, list)
        or not 1 <= len(sources) <= limits.MAX_REDRIVE_SOURCE_QUEUES
        or not all(isinstance(arn, str) and arn for arn in sources)
    ):
        raise invalid(
            f"sourceQueueArns must list 1 to {limits.MAX_REDRIVE_SOURCE_QUEUES} queue ARNs "
            "when redrivePermission is byQueue."
        )


def validate_fifo_settings(attributes: dict[str, str]) -> None:
    """The FIFO attributes' rule across attributes, on a FIFO queue's effective attributes.

    High throughput (`FifoThroughputLimit` perMessageGroupId) needs deduplication per message
    group; the text is AWS's (CloudFormation users report it from CreateQueue).
    """
    if (
        attributes.get("FifoThroughputLimit") == "perMessageGroupId"
        and attributes.get("DeduplicationScope") != "messageGroup"
    ):
        raise InvalidAttributeValue(
            "Invalid value for the parameter FifoThroughputLimit. Reason: To set "
            "FifoThroughputLimit to perMessageGroupId, the DeduplicationScope must be "
            "messageGroup."
        )


def requested_names(names: list[str], fifo: bool = False) -> list[str]:
    """Expand `All` and reject unknown names (GetQueueAttributes).

    The FIFO attributes are names only a FIFO queue knows: asked of a standard queue, SQS
    answers InvalidAttributeName.
    """
    known = FIFO_ALL_NAMES if fifo else ALL_NAMES
    if "All" in names:
        return list(known)
    for name in names:
        if name not in known:
            raise InvalidAttributeName(f"Unknown Attribute {name}.")
    return list(dict.fromkeys(names))
