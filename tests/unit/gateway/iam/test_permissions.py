"""AddPermission / RemovePermission as edits of a queue policy, and what the result grants."""

from __future__ import annotations

import json

import pytest

from gateway.common.errors import InvalidParameterValue, MissingParameter, OverLimit
from gateway.iam.authorize import Target, decide
from gateway.iam.permissions import add_permission, remove_permission
from gateway.iam.policy import Decision, Policy
from gateway.iam.principal import Principal

QUEUE = "arn:aws:sqs:us-east-1:444455556666:orders"


def root(account: str) -> Principal:
    return Principal.root(account, f"key-{account}")


def test_add_permission_writes_a_labelled_statement_for_the_accounts() -> None:
    text = add_permission(None, QUEUE, "AliceSend", ["111122223333"], ["SendMessage"])
    assert json.loads(text) == {
        "Version": "2008-10-17",
        "Id": f"{QUEUE}/SQSDefaultPolicy",
        "Statement": [
            {
                "Sid": "AliceSend",
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
                "Action": "SQS:SendMessage",
                "Resource": QUEUE,
            }
        ],
    }


def test_a_single_action_also_grants_its_batch_twin() -> None:
    policy = Policy.parse(
        add_permission(None, QUEUE, "l", ["111122223333"], ["SendMessage", "DeleteMessage"])
    )
    target = Target("444455556666", QUEUE, policy)
    for action in ("SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch"):
        assert decide(root("111122223333"), action, target, {}) is Decision.ALLOW
    for action in ("ReceiveMessage", "ChangeMessageVisibilityBatch"):
        assert decide(root("111122223333"), action, target, {}) is Decision.IMPLICIT_DENY


def test_star_grants_every_shareable_action_to_several_accounts() -> None:
    policy = Policy.parse(
        add_permission(None, QUEUE, "all", ["111122223333", "555566667777"], ["*"])
    )
    target = Target("444455556666", QUEUE, policy)
    for account in ("111122223333", "555566667777"):
        assert decide(root(account), "ReceiveMessage", target, {}) is Decision.ALLOW
    assert decide(root("999999999999"), "ReceiveMessage", target, {}) is Decision.IMPLICIT_DENY


def test_permissions_are_separate_and_remove_takes_only_its_label() -> None:
    text = add_permission(None, QUEUE, "everything", ["111122223333"], ["*"])
    text = add_permission(text, QUEUE, "send", ["111122223333"], ["SendMessage"])
    text = remove_permission(text, "send")
    target = Target("444455556666", QUEUE, Policy.parse(text))
    assert decide(root("111122223333"), "SendMessage", target, {}) is Decision.ALLOW
    assert remove_permission(text, "everything") == ""


def test_statements_written_by_hand_are_kept() -> None:
    own = json.dumps(
        {
            "Version": "2012-10-17",
            "Id": "mine",
            "Statement": {
                "Sid": "deny",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:PurgeQueue",
            },
        }
    )
    text = add_permission(own, QUEUE, "send", ["111122223333"], ["SendMessage"])
    document = json.loads(text)
    assert document["Id"] == "mine"
    assert [s["Sid"] for s in document["Statement"]] == ["deny", "send"]
    assert [s["Sid"] for s in json.loads(remove_permission(text, "send"))["Statement"]] == ["deny"]


def test_a_label_is_used_once() -> None:
    text = add_permission(None, QUEUE, "test", ["111122223333"], ["ReceiveMessage"])
    with pytest.raises(
        InvalidParameterValue,
        match=r"^Value test for parameter Label is invalid\. Reason: Already exists\.$",
    ):
        add_permission(text, QUEUE, "test", ["111122223333"], ["SendMessage"])


def test_removing_an_unknown_label_is_invalid() -> None:
    with pytest.raises(InvalidParameterValue, match=r"Reason: can't find label\.$"):
        remove_permission(None, "nope")
    text = add_permission(None, QUEUE, "a", ["111122223333"], ["SendMessage"])
    with pytest.raises(InvalidParameterValue, match="Value b for parameter Label"):
        remove_permission(text, "b")


@pytest.mark.parametrize("label", ["", "has space", "x" * 81, "dots.not.allowed"])
def test_labels_are_1_to_80_alphanumerics_hyphens_underscores(label: str) -> None:
    with pytest.raises(InvalidParameterValue, match="parameter Label is invalid"):
        add_permission(None, QUEUE, label, ["111122223333"], ["SendMessage"])


@pytest.mark.parametrize(
    "action", ["AddPermission", "SetQueueAttributes", "SendMessageBatch", "DeleteQueue"]
)
def test_actions_only_the_owner_may_take_cannot_be_shared(action: str) -> None:
    with pytest.raises(
        InvalidParameterValue,
        match=f"Value SQS:{action} for parameter ActionName is invalid. Reason: Only the queue owner",
    ):
        add_permission(None, QUEUE, "l", ["111122223333"], [action])


def test_at_most_seven_actions() -> None:
    actions = [
        "SendMessage",
        "ReceiveMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "GetQueueAttributes",
        "GetQueueUrl",
        "PurgeQueue",
        "*",
    ]
    with pytest.raises(OverLimit, match="^8 Actions were found, maximum allowed is 7.$"):
        add_permission(None, QUEUE, "l", ["111122223333"], actions)
    add_permission(None, QUEUE, "l", ["111122223333"], actions[:7])


def test_accounts_and_actions_are_required_and_accounts_are_12_digits() -> None:
    with pytest.raises(MissingParameter):
        add_permission(None, QUEUE, "l", [], ["SendMessage"])
    with pytest.raises(MissingParameter):
        add_permission(None, QUEUE, "l", ["111122223333"], [])
    with pytest.raises(InvalidParameterValue, match="PrincipalId"):
        add_permission(None, QUEUE, "l", ["bob"], ["SendMessage"])


def test_at_most_20_statements() -> None:
    text = None
    for i in range(20):
        text = add_permission(text, QUEUE, f"l{i}", ["111122223333"], ["SendMessage"])
    with pytest.raises(OverLimit):
        add_permission(text, QUEUE, "l20", ["111122223333"], ["SendMessage"])
