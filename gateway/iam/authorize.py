"""Whether a principal may perform an SQS action on a queue: the evaluation order of SQS.

Policies that apply: the caller's identity policies (its user's and its groups'), and the
queue's `Policy` attribute. Among them, as the access policy language says, the decision
starts as a default deny, an explicit deny anywhere wins, and otherwise an allow grants.
Who may rely on which policy:

* the queue's own account: its root credentials may do anything to the queue (unless the
  queue policy explicitly denies them); a user needs an allow from its identity policies
  *or* from the queue policy;
* another account: the queue policy must allow the caller (naming its account, its user
  ARN or `*`) *and*, for a user of that account, its identity policies must allow too (the
  other account delegates to its users). Actions only the owner may take (AddPermission,
  RemovePermission, SetQueueAttributes, CreateQueue, DeleteQueue, tags, ListQueues, move
  tasks) are never granted across accounts;
* an anonymous (unsigned) request: only a queue policy statement with principal `*`;
* an administrator: ListQueues, GetQueueUrl, GetQueueAttributes, DeleteQueue and
  PurgeQueue on every account's queues, and KQS's own replay and browse actions
  (`REPLAY_ACTIONS`, which a queue policy may also grant to other accounts); anything else
  as the principal it also is.

A batch action is granted by its single twin (`sqs:SendMessage` grants SendMessageBatch),
as AddPermission documents.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.iam.policy import Decision, Policy, RequestFacts, combine
from gateway.iam.principal import Principal
from lease_store.value_class import value_class

BATCH_TWINS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
OWNER_ONLY = frozenset(
    {
        "AddPermission",
        "RemovePermission",
        "SetQueueAttributes",
        "CreateQueue",
        "DeleteQueue",
        "ListQueues",
        "TagQueue",
        "UntagQueue",
        "ListQueueTags",
        "StartMessageMoveTask",
        "ListMessageMoveTasks",
        "CancelMessageMoveTask",
    }
)
# KQS's own actions (gateway/sqs/replay/), each its own `sqs:` name: the queue's owner and
# the administrator may, anyone else when a policy grants it.
REPLAY_ACTIONS = frozenset(
    {
        "StartMessageReplayTask",
        "ListMessageReplayTasks",
        "CancelMessageReplayTask",
        "PeekMessages",
    }
)
ADMIN_ACTIONS = frozenset(
    {"ListQueues", "GetQueueUrl", "GetQueueAttributes", "DeleteQueue", "PurgeQueue"}
    | REPLAY_ACTIONS
)


@value_class
class Target:
    """What an action acts on: a queue's ARN (or an account-wide ARN), its owner, its policy."""

    owner_account: str
    resource_arn: str
    queue_policy: Policy | None = None


def policy_actions(action: str) -> tuple[str, ...]:
    """The `sqs:` action names that grant `action`."""
    twin = BATCH_TWINS.get(action)
    return (f"sqs:{action}", f"sqs:{twin}") if twin else (f"sqs:{action}",)


# Memoized decisions for callers whose identity policies have no conditions, on queues
# without a policy: (principal ARN, access key, action, owner, resource) -> (the principal
# object decided for, decision). Bounded like `Policy`'s memo.
_DECIDED: dict[tuple[str, str | None, str, str, str], tuple[Principal, Decision]] = {}
_MAX_DECIDED = 4096


def decide(
    principal: Principal, action: str, target: Target, conditions: Mapping[str, str]
) -> Decision:
    if target.queue_policy is not None or principal.anonymous:
        return _decide(principal, action, target, conditions)
    if principal.is_root and principal.account_id == target.owner_account:
        # The owner's root credentials on a queue without a policy: nothing can deny them
        # (the general rule gives the same answer, after building every fact).
        return Decision.ALLOW
    if not principal.unconditional:
        return _decide(principal, action, target, conditions)
    # No condition is read, so the decision depends only on who, what and which queue, which
    # repeat from request to request (the embedded `test` user decided every request anew).
    # The memo holds the principal it decided for: a principal rebuilt from a changed
    # configuration is another object, and is decided again.
    key = (principal.arn, principal.access_key, action, target.owner_account, target.resource_arn)
    memo = _DECIDED.get(key)
    if memo is not None and memo[0] is principal:
        return memo[1]
    decision = _decide(principal, action, target, conditions)
    if len(_DECIDED) >= _MAX_DECIDED:
        _DECIDED.clear()
    _DECIDED[key] = (principal, decision)
    return decision


def _decide(
    principal: Principal, action: str, target: Target, conditions: Mapping[str, str]
) -> Decision:
    if (
        target.queue_policy is None
        and principal.is_root
        and not principal.anonymous
        and principal.account_id == target.owner_account
    ):
        return Decision.ALLOW
    facts = RequestFacts(
        principal_arn=principal.arn,
        principal_account=None if principal.anonymous else principal.account_id,
        actions=policy_actions(action),
        resource=target.resource_arn,
        conditions=conditions,
    )
    queue = (
        target.queue_policy.evaluate(facts, resource_policy=True)
        if target.queue_policy is not None
        else Decision.IMPLICIT_DENY
    )
    if principal.is_admin and action in ADMIN_ACTIONS:
        return Decision.ALLOW
    if principal.anonymous:
        if action in OWNER_ONLY:
            return Decision.IMPLICIT_DENY
        return queue
    identity = (
        Decision.ALLOW
        if principal.is_root
        else combine([p.evaluate(facts, resource_policy=False) for p in principal.policies])
    )
    if principal.account_id == target.owner_account:
        if principal.is_root:
            return Decision.DENY if queue is Decision.DENY else Decision.ALLOW
        return combine([identity, queue])
    if action in OWNER_ONLY:
        return Decision.IMPLICIT_DENY
    if Decision.DENY in (identity, queue):
        return Decision.DENY
    if identity is Decision.ALLOW and queue is Decision.ALLOW:
        return Decision.ALLOW
    return Decision.IMPLICIT_DENY
