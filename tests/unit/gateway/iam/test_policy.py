"""The access policy evaluator against the policies of the SQS developer guide (seed 000).

Each case loads a policy exactly as the guide prints it and checks what the guide says it
does: who may do what, from where, when.
"""

from __future__ import annotations

import pytest

from gateway.iam.authorize import Target, decide, policy_actions
from gateway.iam.policy import Decision, Policy, PolicyError, RequestFacts
from gateway.iam.principal import Principal, anonymous, root_arn, user_arn
from tests.support import seed_policies as seed

ALLOW, DENY, IMPLICIT = Decision.ALLOW, Decision.DENY, Decision.IMPLICIT_DENY
NOON_2009_01_31 = "2009-01-31T12:00:00Z"


def facts(
    action: str,
    resource: str,
    account: str | None = "111122223333",
    user: str | None = None,
    **conditions: str,
) -> RequestFacts:
    """A request by `account`'s root (or its `user`), or anonymous when account is None."""
    if account is None:
        arn = "*"
    else:
        arn = user_arn(account, user) if user else root_arn(account)
    keys = {"aws:currenttime": "2024-05-01T10:00:00Z", **conditions}
    return RequestFacts(
        principal_arn=arn,
        principal_account=account,
        actions=policy_actions(action),
        resource=resource,
        conditions={k.replace("__", ":").lower(): v for k, v in keys.items()},
    )


def queue_decision(policy_text: str, request: RequestFacts) -> Decision:
    return Policy.parse(policy_text).evaluate(request, resource_policy=True)


QUEUE1_CN = "arn:aws:sqs:cn-north-1:444455556666:queue1"
OWNED_QUEUE1 = "arn:aws:sqs:us-east-1:111122223333:queue1"


# -- Amazon SQS Policy Examples ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_facts", "expected"),
    [
        (facts("SendMessage", QUEUE1_CN), ALLOW),
        (facts("SendMessageBatch", QUEUE1_CN), ALLOW),  # the batch twin
        (facts("SendMessage", QUEUE1_CN, user="dev"), ALLOW),  # any principal of the account
        (facts("ReceiveMessage", QUEUE1_CN), IMPLICIT),
        (facts("SendMessage", QUEUE1_CN, account="999999999999"), IMPLICIT),
        (facts("SendMessage", "arn:aws:sqs:us-east-1:444455556666:queue1"), IMPLICIT),
        (facts("SendMessage", "arn:aws:sqs:cn-north-1:444455556666:queue2"), IMPLICIT),
        (facts("SendMessage", QUEUE1_CN, account=None), IMPLICIT),
    ],
)
def test_example_send_message_for_one_account(
    request_facts: RequestFacts, expected: Decision
) -> None:
    assert queue_decision(seed.EXAMPLE_SEND, request_facts) is expected


@pytest.mark.parametrize(
    ("request_facts", "expected"),
    [
        (facts("SendMessage", QUEUE1_CN), ALLOW),
        (facts("ReceiveMessage", "arn:aws:sqs:eu-west-1:444455556666:queue1"), ALLOW),
        (facts("DeleteMessage", QUEUE1_CN), IMPLICIT),
        (facts("ReceiveMessage", "arn:aws:sqs:eu-west-1:444455556666:queue10"), IMPLICIT),
    ],
)
def test_example_send_and_receive_in_any_region(
    request_facts: RequestFacts, expected: Decision
) -> None:
    assert queue_decision(seed.EXAMPLE_SEND_RECEIVE, request_facts) is expected


@pytest.mark.parametrize(
    ("request_facts", "expected"),
    [
        (facts("DeleteMessage", "arn:aws:sqs:cn-north-1:123456789012:queue1"), ALLOW),
        (
            facts(
                "ChangeMessageVisibilityBatch",
                "arn:aws:sqs:cn-north-1:123456789012:queue1",
                account="444455556666",
            ),
            ALLOW,
        ),
        (
            facts(
                "SendMessage", "arn:aws:sqs:cn-north-1:123456789012:queue1", account="555566667777"
            ),
            IMPLICIT,
        ),
    ],
)
def test_example_two_accounts_all_actions(request_facts: RequestFacts, expected: Decision) -> None:
    assert queue_decision(seed.EXAMPLE_TWO_ACCOUNTS_ALL_ACTIONS, request_facts) is expected


@pytest.mark.parametrize(
    ("request_facts", "expected"),
    [
        (facts("ReceiveMessage", OWNED_QUEUE1, account=None), ALLOW),
        (facts("ReceiveMessage", OWNED_QUEUE1, account="999999999999"), ALLOW),
        (facts("SendMessage", OWNED_QUEUE1, account=None), IMPLICIT),
    ],
)
def test_example_anonymous_receive(request_facts: RequestFacts, expected: Decision) -> None:
    assert queue_decision(seed.EXAMPLE_ANONYMOUS_RECEIVE, request_facts) is expected


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        ("2009-01-31T12:00:01Z", ALLOW),
        ("2009-01-31T14:59:59Z", ALLOW),
        ("2009-01-31T15:00:00Z", IMPLICIT),
        ("2009-01-31T11:59:59Z", IMPLICIT),
        ("2024-01-31T13:00:00Z", IMPLICIT),
    ],
)
def test_example_anonymous_receive_between_noon_and_three(now: str, expected: Decision) -> None:
    request = facts("ReceiveMessage", OWNED_QUEUE1, account=None, aws__CurrentTime=now)
    assert queue_decision(seed.EXAMPLE_ANONYMOUS_RECEIVE_TIME_LIMIT, request) is expected


@pytest.mark.parametrize(
    ("ip", "action", "expected"),
    [
        ("192.168.143.1", "SendMessage", ALLOW),
        ("192.168.143.254", "PurgeQueue", ALLOW),
        ("192.168.144.1", "SendMessage", IMPLICIT),
        ("10.0.0.1", "ReceiveMessage", IMPLICIT),
    ],
)
def test_example_anonymous_all_actions_from_one_network(
    ip: str, action: str, expected: Decision
) -> None:
    request = facts(action, OWNED_QUEUE1, account=None, aws__SourceIp=ip)
    assert queue_decision(seed.EXAMPLE_ANONYMOUS_ALL_ACTIONS_IP, request) is expected


@pytest.mark.parametrize(
    ("ip", "action", "expected"),
    [
        ("192.168.143.10", "SendMessage", ALLOW),
        ("192.168.143.188", "SendMessage", IMPLICIT),  # the one excepted address
        ("192.168.143.10", "ReceiveMessage", IMPLICIT),
        ("10.1.2.3", "SendMessage", DENY),  # blacklisted: an explicit deny
        ("10.1.2.3", "GetQueueAttributes", DENY),
        ("10.1.3.3", "SendMessage", IMPLICIT),
    ],
)
def test_example_send_from_a_network_but_one_address_and_deny_another_network(
    ip: str, action: str, expected: Decision
) -> None:
    request = facts(action, OWNED_QUEUE1, account=None, aws__SourceIp=ip)
    assert queue_decision(seed.EXAMPLE_IP_ALLOW_AND_DENY, request) is expected


def test_example_ip_deny_wins_over_an_identity_allow_of_the_owner_account() -> None:
    # Given a user of the queue's account whose identity policy allows everything
    user = Principal(
        "111122223333",
        user_arn("111122223333", "alice"),
        "alice",
        "alice",
        policies=(
            Policy.parse('{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}}'),
        ),
    )
    target = Target("111122223333", OWNED_QUEUE1, Policy.parse(seed.EXAMPLE_IP_ALLOW_AND_DENY))
    # Then the queue policy's deny for 10.1.2.0/24 still wins
    assert decide(user, "SendMessage", target, {"aws:sourceip": "10.1.2.9"}) is DENY
    assert decide(user, "SendMessage", target, {"aws:sourceip": "127.0.0.1"}) is ALLOW


@pytest.mark.parametrize(
    ("source_arn", "expected"),
    [
        ("arn:aws:sns:cn-north-1:111122223333:test-topic", ALLOW),
        ("arn:aws:sns:cn-north-1:111122223333:other-topic", IMPLICIT),
        (None, IMPLICIT),
    ],
)
def test_example_sns_topic_to_queue(source_arn: str | None, expected: Decision) -> None:
    resource = "arn:aws:sqs:cn-north-1:111122223333:test-topic-queue"
    conditions = {"aws__SourceArn": source_arn} if source_arn else {}
    request = facts("SendMessage", resource, account=None, **conditions)
    assert queue_decision(seed.EXAMPLE_SNS_TO_SQS, request) is expected


# -- Basic use cases for access control ----------------------------------------------------------

QUEUE2_CN = "arn:aws:sqs:cn-north-1:444455556666:queue2"


def test_use_case_1_grants_send_and_receive_to_one_account() -> None:
    assert queue_decision(seed.USE_CASE_1, facts("ReceiveMessage", QUEUE2_CN)) is ALLOW
    assert queue_decision(seed.USE_CASE_1, facts("DeleteMessage", QUEUE2_CN)) is IMPLICIT


@pytest.mark.parametrize(
    ("now", "expected"), [("2009-06-30T11:59Z", ALLOW), ("2009-06-30T12:00Z", IMPLICIT)]
)
def test_use_case_2_grants_until_a_time(now: str, expected: Decision) -> None:
    request = facts("SendMessage", QUEUE2_CN, aws__CurrentTime=now)
    assert queue_decision(seed.USE_CASE_2, request) is expected


@pytest.mark.parametrize(
    ("now", "ip", "expected"),
    [
        ("2009-06-01T00:00:00Z", "10.52.176.7", ALLOW),
        ("2009-06-01T00:00:00Z", "10.52.177.7", IMPLICIT),
        ("2009-07-01T00:00:00Z", "10.52.176.7", IMPLICIT),
    ],
)
def test_use_case_3_grants_until_a_time_and_from_a_network(
    now: str, ip: str, expected: Decision
) -> None:
    request = facts("ReceiveMessage", QUEUE2_CN, aws__CurrentTime=now, aws__SourceIp=ip)
    assert queue_decision(seed.USE_CASE_3, request) is expected


def test_use_case_4_denies_one_account() -> None:
    assert queue_decision(seed.USE_CASE_4, facts("SendMessage", QUEUE2_CN)) is DENY
    other = facts("SendMessage", QUEUE2_CN, account="999999999999")
    assert queue_decision(seed.USE_CASE_4, other) is IMPLICIT


def test_evaluation_logic_scenarios_default_deny_is_overridden_explicit_deny_is_not() -> None:
    # Policy A1 allows unless from Antarctica (default deny there), A2 denies Antarctica,
    # policy B allows on June 1 2010; a request from Antarctica on that day:
    a1 = Policy.parse(
        '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:*",'
        ' "Condition": {"NotIpAddress": {"aws:SourceIp": "10.9.0.0/16"}}}}'
    )
    a2 = Policy.parse(
        '{"Statement": {"Effect": "Deny", "Principal": "*", "Action": "sqs:*",'
        ' "Condition": {"IpAddress": {"aws:SourceIp": "10.9.0.0/16"}}}}'
    )
    b = Policy.parse(
        '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Condition":'
        ' {"DateGreaterThanEquals": {"aws:CurrentTime": "2010-06-01T00:00:00Z"},'
        ' "DateLessThan": {"aws:CurrentTime": "2010-06-02T00:00:00Z"}}}}'
    )
    from_antarctica = facts(
        "SendMessage", OWNED_QUEUE1, aws__SourceIp="10.9.1.1", aws__CurrentTime="2010-06-01T08:00Z"
    )
    # Scenario 1: A1 default-denies, B allows: allowed
    scenario_1 = [p.evaluate(from_antarctica, resource_policy=True) for p in (a1, b)]
    assert scenario_1 == [IMPLICIT, ALLOW]
    # Scenario 2: A2 explicitly denies, B allows: denied
    combined = Policy.parse('{"Statement": [' + _statement_of(a2) + "," + _statement_of(b) + "]}")
    assert combined.evaluate(from_antarctica, resource_policy=True) is DENY


def _statement_of(policy: Policy) -> str:
    import json

    return json.dumps(policy.document["Statement"])


# -- Example IAM policies (identity policies: no Principal) ---------------------------------


def identity_decision(policy_text: str, action: str, queue: str) -> Decision:
    request = facts(action, f"arn:aws:sqs:us-east-1:123456789012:{queue}", "123456789012", "bob")
    return Policy.parse(policy_text).evaluate(request, resource_policy=False)


def test_iam_example_1_bob_uses_his_own_queues() -> None:
    assert identity_decision(seed.IAM_BOB_QUEUES, "CreateQueue", "bob_queue_orders") is ALLOW
    assert identity_decision(seed.IAM_BOB_QUEUES, "DeleteQueue", "bob_queue") is ALLOW
    assert identity_decision(seed.IAM_BOB_QUEUES, "SendMessage", "alice_queue") is IMPLICIT


def test_iam_example_2_developers_send_to_the_test_queue() -> None:
    assert identity_decision(seed.IAM_DEVELOPERS_SEND, "SendMessage", "CompanyTestQueue") is ALLOW
    assert (
        identity_decision(seed.IAM_DEVELOPERS_SEND, "SendMessageBatch", "CompanyTestQueue") is ALLOW
    )
    assert (
        identity_decision(seed.IAM_DEVELOPERS_SEND, "ReceiveMessage", "CompanyTestQueue")
        is IMPLICIT
    )
    assert identity_decision(seed.IAM_DEVELOPERS_SEND, "SendMessage", "ProdQueue") is IMPLICIT


def test_iam_example_3_managers_read_every_queue_size() -> None:
    assert identity_decision(seed.IAM_MANAGERS_ATTRIBUTES, "GetQueueAttributes", "any") is ALLOW
    assert identity_decision(seed.IAM_MANAGERS_ATTRIBUTES, "PurgeQueue", "any") is IMPLICIT


def test_iam_example_4_partner_may_only_send_to_its_queue() -> None:
    policy = seed.IAM_WIDGETCO_PARTNER
    assert identity_decision(policy, "SendMessage", "WidgetPartnerQueue") is ALLOW
    assert identity_decision(policy, "ReceiveMessage", "OtherQueue") is DENY
    assert identity_decision(policy, "ReceiveMessage", "WidgetPartnerQueue") is IMPLICIT
    assert identity_decision(policy, "SendMessage", "OtherQueue") is IMPLICIT


# -- the language's other parts ------------------------------------------------------------


def test_old_account_slash_queue_resource_form_names_the_queue_in_any_region() -> None:
    policy = (
        '{"Statement": {"Effect": "Allow", "Principal": {"AWS": "111122223333"},'
        ' "Action": "sqs:SendMessage", "Resource": "444455556666/queue1"}}'
    )
    assert queue_decision(policy, facts("SendMessage", QUEUE1_CN)) is ALLOW
    other = "arn:aws:sqs:cn-north-1:444455556666:queue11"
    assert queue_decision(policy, facts("SendMessage", other)) is IMPLICIT


def test_not_principal_matches_everyone_else() -> None:
    policy = (
        '{"Statement": {"Effect": "Deny", "NotPrincipal": {"AWS": "111122223333"},'
        ' "Action": "sqs:*"}}'
    )
    assert queue_decision(policy, facts("SendMessage", QUEUE1_CN)) is IMPLICIT
    assert queue_decision(policy, facts("SendMessage", QUEUE1_CN, "999999999999")) is DENY
    assert queue_decision(policy, facts("SendMessage", QUEUE1_CN, None)) is DENY


def test_user_arn_principal_names_only_that_user() -> None:
    policy = (
        '{"Statement": {"Effect": "Allow", "Principal": {"AWS":'
        ' "arn:aws:iam::111122223333:user/bob"}, "Action": "sqs:ReceiveMessage"}}'
    )
    assert queue_decision(policy, facts("ReceiveMessage", QUEUE1_CN, user="bob")) is ALLOW
    assert queue_decision(policy, facts("ReceiveMessage", QUEUE1_CN, user="eve")) is IMPLICIT


@pytest.mark.parametrize(
    ("operator", "key", "value", "request_value", "holds"),
    [
        ("StringLike", "aws:UserAgent", "Boto3/*", "Boto3/1.34 Python/3.11", True),
        ("StringNotLike", "aws:UserAgent", "Boto3/*", "aws-cli/2", True),
        ("StringEqualsIgnoreCase", "aws:username", "BOB", "bob", True),
        ("StringNotEquals", "aws:username", "bob", "bob", False),
        ("NumericLessThan", "aws:EpochTime", "2000000000", "1700000000", True),
        ("NumericGreaterThanEquals", "aws:EpochTime", "1700000001", "1700000000", False),
        ("DateLessThanEquals", "aws:CurrentTime", "1700000000", "2023-11-14T22:13:20Z", True),
        ("Bool", "aws:SecureTransport", "true", "false", False),
        ("Bool", "aws:SecureTransport", "false", "false", True),
        (
            "ArnLike",
            "aws:SourceArn",
            "arn:aws:sns:*:111122223333:*",
            "arn:aws:sns:eu-west-1:111122223333:t",
            True,
        ),
        (
            "ArnNotEquals",
            "aws:SourceArn",
            "arn:aws:sns:eu-west-1:111122223333:t",
            "arn:aws:sns:eu-west-1:111122223333:t",
            False,
        ),
        ("StringLike", "aws:Referer", "https://example.com/*", "https://example.com/page", True),
        ("NotIpAddress", "aws:SourceIp", "127.0.0.0/8", "10.1.1.1", True),
        ("IpAddress", "aws:SourceIp", "::1/128", "::1", True),
    ],
)
def test_condition_operators(
    operator: str, key: str, value: str, request_value: str, holds: bool
) -> None:
    policy = (
        '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",'
        f' "Condition": {{"{operator}": {{"{key}": "{value}"}}}}}}}}'
    )
    request = facts("SendMessage", QUEUE1_CN, **{key.replace(":", "__"): request_value})
    assert queue_decision(policy, request) is (ALLOW if holds else IMPLICIT)


def test_a_missing_key_fails_a_condition_unless_if_exists_or_null() -> None:
    def decision(condition: str) -> Decision:
        policy = (
            '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:*",'
            f' "Condition": {condition}}}}}'
        )
        return queue_decision(policy, facts("SendMessage", QUEUE1_CN))

    assert decision('{"StringEquals": {"aws:Referer": "x"}}') is IMPLICIT
    assert decision('{"StringEqualsIfExists": {"aws:Referer": "x"}}') is ALLOW
    assert decision('{"Null": {"aws:Referer": "true"}}') is ALLOW
    assert decision('{"Null": {"aws:Referer": "false"}}') is IMPLICIT


def test_several_values_of_one_key_are_alternatives_and_several_keys_all_apply() -> None:
    policy = (
        '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Condition":'
        ' {"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.168.0.0/16"]},'
        ' "StringEquals": {"aws:UserAgent": "app"}}}}'
    )
    ok = facts("SendMessage", QUEUE1_CN, aws__SourceIp="192.168.1.1", aws__UserAgent="app")
    wrong_agent = facts("SendMessage", QUEUE1_CN, aws__SourceIp="10.1.1.1", aws__UserAgent="x")
    assert queue_decision(policy, ok) is ALLOW
    assert queue_decision(policy, wrong_agent) is IMPLICIT


def test_action_names_are_case_insensitive_with_wildcards() -> None:
    policy = '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "SQS:Send*"}}'
    assert queue_decision(policy, facts("SendMessageBatch", QUEUE1_CN)) is ALLOW
    assert queue_decision(policy, facts("ReceiveMessage", QUEUE1_CN)) is IMPLICIT
    question = '{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:?eleteMessage"}}'
    assert queue_decision(question, facts("DeleteMessage", QUEUE1_CN)) is ALLOW


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"Statement": {"Effect": "Maybe", "Action": "sqs:*"}}',
        '{"Statement": {"Effect": "Allow"}}',
        '{"Statement": {"Effect": "Allow", "Action": "sqs:*", "NotAction": "sqs:x"}}',
        '{"Statement": {"Effect": "Allow", "Action": "sqs:*", "Condition": {"Nope": {"a": "b"}}}}',
        '{"Statement": {"Effect": "Allow", "Action": "sqs:*", "Principal": 5}}',
    ],
)
def test_invalid_policies_are_refused(text: str) -> None:
    with pytest.raises(PolicyError):
        Policy.parse(text)


# -- the evaluation order across identity and queue policies --------------------------------

OWNER = "444455556666"
QUEUE = f"arn:aws:sqs:us-east-1:{OWNER}:queue1"
ALLOW_ALL = Policy.parse('{"Statement": {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}}')


def user(account: str, name: str, *policies: Policy, admin: bool = False) -> Principal:
    return Principal(account, user_arn(account, name), name, name, admin, policies)


def grant(principal: str, action: str = "sqs:SendMessage", effect: str = "Allow") -> Policy:
    return Policy.parse(
        f'{{"Statement": {{"Effect": "{effect}", "Principal": {{"AWS": "{principal}"}},'
        f' "Action": "{action}", "Resource": "{QUEUE}"}}}}'
    )


def test_owner_root_may_do_anything_but_what_the_queue_policy_denies() -> None:
    root = Principal.root(OWNER, "root")
    assert decide(root, "SetQueueAttributes", Target(OWNER, QUEUE), {}) is ALLOW
    denied = Target(OWNER, QUEUE, grant(OWNER, effect="Deny"))
    assert decide(root, "SendMessage", denied, {}) is DENY


def test_same_account_user_needs_an_allow_from_either_side() -> None:
    nobody = user(OWNER, "carl")
    assert decide(nobody, "SendMessage", Target(OWNER, QUEUE), {}) is IMPLICIT
    by_queue = Target(OWNER, QUEUE, grant(user_arn(OWNER, "carl")))
    assert decide(nobody, "SendMessage", by_queue, {}) is ALLOW
    assert decide(user(OWNER, "dora", ALLOW_ALL), "SendMessage", Target(OWNER, QUEUE), {}) is ALLOW


def test_cross_account_needs_the_queue_policy_and_the_users_own_allow() -> None:
    target = Target(OWNER, QUEUE, grant("111122223333"))
    assert decide(user("111122223333", "eve", ALLOW_ALL), "SendMessage", target, {}) is ALLOW
    assert decide(user("111122223333", "eve"), "SendMessage", target, {}) is IMPLICIT
    assert decide(Principal.root("111122223333", "k"), "SendMessage", target, {}) is ALLOW
    no_policy = Target(OWNER, QUEUE)
    assert decide(user("111122223333", "eve", ALLOW_ALL), "SendMessage", no_policy, {}) is IMPLICIT


def test_owner_only_actions_are_never_granted_across_accounts() -> None:
    target = Target(OWNER, QUEUE, grant("*", action="sqs:*"))
    eve = user("111122223333", "eve", ALLOW_ALL)
    assert decide(eve, "SendMessage", target, {}) is ALLOW
    for action in ("AddPermission", "SetQueueAttributes", "DeleteQueue", "TagQueue"):
        assert decide(eve, action, target, {}) is IMPLICIT


def test_anonymous_needs_a_star_principal() -> None:
    caller = anonymous(OWNER)
    assert decide(caller, "SendMessage", Target(OWNER, QUEUE, grant(OWNER)), {}) is IMPLICIT
    assert decide(caller, "SendMessage", Target(OWNER, QUEUE, grant("*")), {}) is ALLOW


def test_admin_lists_deletes_and_purges_any_queue_but_is_otherwise_a_user() -> None:
    admin = user("999999999999", "ops", admin=True)
    for action in ("ListQueues", "DeleteQueue", "PurgeQueue", "GetQueueUrl"):
        assert decide(admin, action, Target(OWNER, QUEUE), {}) is ALLOW
    assert decide(admin, "ReceiveMessage", Target(OWNER, QUEUE), {}) is IMPLICIT


# -- the 2014 guide's forms (seed 002): {"AWS": "*"}, "/<account>/<queue>", hyphenated ids --------

SEED_2014_TIME_LIMIT = """{
  "Version": "2008-10-17",
  "Id": "Queue1_Policy_UUID",
  "Statement": [
    {
      "Sid": "Queue1_AnonymousAccess_ReceiveMessage_TimeLimit",
      "Effect": "Allow",
      "Principal": {
        "AWS": "*"
      },
      "Action": "sqs:ReceiveMessage",
      "Resource": "/987654321098/queue1",
      "Condition": {
        "DateGreaterThan": {
          "aws:CurrentTime": "2009-01-31T12:00Z"
        },
        "DateLessThan": {
          "aws:CurrentTime": "2009-01-31T15:00Z"
        }
      }
    }
  ]
}"""


def test_2014_example_aws_star_and_slash_resource() -> None:
    queue = "arn:aws:sqs:us-east-1:987654321098:queue1"
    inside = facts("ReceiveMessage", queue, account=None, aws__CurrentTime="2009-01-31T13:00Z")
    outside = facts("ReceiveMessage", queue, account=None, aws__CurrentTime="2009-01-31T16:00Z")
    other_queue = facts(
        "ReceiveMessage",
        "arn:aws:sqs:us-east-1:987654321098:queue2",
        account=None,
        aws__CurrentTime="2009-01-31T13:00Z",
    )
    assert queue_decision(SEED_2014_TIME_LIMIT, inside) is ALLOW
    assert queue_decision(SEED_2014_TIME_LIMIT, outside) is IMPLICIT
    assert queue_decision(SEED_2014_TIME_LIMIT, other_queue) is IMPLICIT


def test_account_ids_may_be_written_with_hyphens() -> None:
    policy = '{"Statement": {"Effect": "Allow", "Principal": {"AWS": "1111-2222-3333"}, "Action": "sqs:*"}}'
    assert queue_decision(policy, facts("SendMessage", QUEUE1_CN, "111122223333")) is ALLOW
    assert queue_decision(policy, facts("SendMessage", QUEUE1_CN, "111122223334")) is IMPLICIT


def test_a_remembered_decision_is_not_reused_for_a_principal_rebuilt_with_other_policies() -> None:
    # Given dora's decision remembered while she may do anything
    assert decide(user(OWNER, "dora", ALLOW_ALL), "SendMessage", Target(OWNER, QUEUE), {}) is ALLOW
    # When her configuration changes to no policy at all (same ARN, same access key)
    rebuilt = user(OWNER, "dora")
    # Then she is decided anew
    assert decide(rebuilt, "SendMessage", Target(OWNER, QUEUE), {}) is IMPLICIT


def test_a_user_with_a_conditional_policy_is_decided_on_each_requests_conditions() -> None:
    # Given a user allowed to send until noon
    until_noon = Policy.parse(
        '{"Statement": {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*",'
        ' "Condition": {"DateLessThan": {"aws:CurrentTime": "2009-01-31T12:00:00Z"}}}}'
    )
    fred = user(OWNER, "fred", until_noon)
    target = Target(OWNER, QUEUE)
    # When he sends before noon, and then after it
    before = decide(fred, "SendMessage", target, {"aws:currenttime": "2009-01-31T11:00:00Z"})
    after = decide(fred, "SendMessage", target, {"aws:currenttime": "2009-01-31T13:00:00Z"})
    # Then only the first is allowed
    assert (before, after) == (ALLOW, IMPLICIT)
