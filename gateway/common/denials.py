"""A request Kafka's authorizer refused, told as the ACL the gateway's principal lacks.

Kafka says only that a topic or group was not authorized; which operation was refused
follows from what the action asked of Kafka. The grants named are those of
`topology/acls.py` (README, "Kafka ACLs"), so an operator reads what to add.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from topology.acls import GROUP_PREFIX, INTERNAL_TOPIC_PREFIX, QUEUE_TOPIC_PREFIX
from topology.producer import ProduceFailed

_QUEUE = f"topics prefixed '{QUEUE_TOPIC_PREFIX}'"
_INTERNAL = f"topics prefixed '{INTERNAL_TOPIC_PREFIX}'"
_CATALOG = f"WRITE on {_INTERNAL}"
_LEASES = f"WRITE on {_INTERNAL} (the lease changelog)"

# What each action asks of Kafka's topics, beyond DESCRIBE (which every one needs).
_TOPIC_NEEDS = {
    "SendMessage": f"WRITE on {_QUEUE}",
    "SendMessageBatch": f"WRITE on {_QUEUE}",
    "CreateQueue": f"CREATE on {_QUEUE}, {_CATALOG}",
    "DeleteQueue": f"DELETE on {_QUEUE}, {_CATALOG}",
    "PurgeQueue": f"DELETE on {_QUEUE}",
    "SetQueueAttributes": f"ALTER_CONFIGS on {_QUEUE}, {_CATALOG}",
    "TagQueue": _CATALOG,
    "UntagQueue": _CATALOG,
    "AddPermission": _CATALOG,
    "RemovePermission": _CATALOG,
    "ReceiveMessage": f"READ on {_QUEUE}, {_LEASES}",
    "DeleteMessage": _LEASES,
    "DeleteMessageBatch": _LEASES,
    "ChangeMessageVisibility": _LEASES,
    "ChangeMessageVisibilityBatch": _LEASES,
}
_GROUP_NEEDS = f"READ and DESCRIBE on groups prefixed '{GROUP_PREFIX}'"


def _code(exc: BaseException) -> int | None:
    if isinstance(exc, ProduceFailed):
        return int(exc.code)
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None


def missing_acl(exc: BaseException, action: str) -> str | None:
    """The ACL(s) Kafka refusing `action` with `exc` points to, or None if `exc` is not a refusal."""
    code = _code(exc)
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return _TOPIC_NEEDS.get(action, f"DESCRIBE on {_QUEUE} and {_INTERNAL}")
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return _GROUP_NEEDS
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return "an ACL on the cluster resource (KQS needs none: check the broker's authorizer log)"
    return None
