"""Accounts, signatures and access policies end to end, through both protocols.

A gateway of its own runs with a TOML configuration of four accounts (the account ids of
the developer guide's examples): the queue owner 444455556666 (users alice, reader and
blocked), the partner 111122223333 (bob), a third account 123456789012 (carol), and an
administrator's account 999999999999 (ops). Requests are real boto3 (JSON) and botocore
(Query) calls, signed or unsigned, and raw HTTP where a source address must be chosen.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import botocore.auth
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import seed_policies as seed
from tests.support.harness import NO_RETRIES, GatewayProcess, client_for

OWNER, PARTNER, THIRD, OPS = "444455556666", "111122223333", "123456789012", "999999999999"
KEYS = {
    "alice": ("alice", "alice-secret"),
    "reader": ("reader", "reader-secret"),
    "blocked": ("blocked", "blocked-secret"),
    "owner-root": ("owner-root", "owner-root-secret"),
    "bob": ("bob", "bob-secret"),
    "carol": ("carol", "carol-secret"),
    "ops": ("ops", "ops-secret"),
}
ALL_SQS = '{"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}}'
CONFIG = f"""
default_account = "{OWNER}"

[[accounts]]
id = "{OWNER}"
access_key_id = "owner-root"
secret_access_key = "owner-root-secret"

[[accounts.groups]]
name = "developers"
policies = ['''{{"Version": "2012-10-17", "Statement": {{"Effect": "Allow", "Action": "sqs:*",
  "Resource": "arn:aws:sqs:*:{OWNER}:*"}}}}''']

[[accounts.users]]
name = "alice"
access_key_id = "alice"
secret_access_key = "alice-secret"
groups = ["developers"]

[[accounts.users]]
name = "reader"
access_key_id = "reader"
secret_access_key = "reader-secret"
policies = ['''{{"Version": "2012-10-17", "Statement": {{"Effect": "Allow",
  "Action": ["sqs:ReceiveMessage", "sqs:GetQueueUrl"], "Resource": "*"}}}}''']

[[accounts.users]]
name = "blocked"
access_key_id = "blocked"
secret_access_key = "blocked-secret"
policies = ['{ALL_SQS}', '''{{"Version": "2012-10-17", "Statement": {{"Effect": "Deny",
  "Action": "sqs:SendMessage", "Resource": "*"}}}}''']

[[accounts]]
id = "{PARTNER}"

[[accounts.users]]
name = "bob"
access_key_id = "bob"
secret_access_key = "bob-secret"
policies = ['{ALL_SQS}']

[[accounts]]
id = "{THIRD}"

[[accounts.users]]
name = "carol"
access_key_id = "carol"
secret_access_key = "carol-secret"
policies = ['{ALL_SQS}']

[[accounts]]
id = "{OPS}"

[[accounts.users]]
name = "ops"
access_key_id = "ops"
secret_access_key = "ops-secret"
admin = true
"""


@pytest.fixture(scope="module")
def iam_gateway(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    data_dir = tmp_path_factory.mktemp("iam-gateway")
    config = data_dir / "iam.toml"
    config.write_text(CONFIG)
    process = GatewayProcess(data_dir, kafka_bootstrap, env={"KQS_IAM_CONFIG": str(config)})
    process.start()
    yield process
    process.stop()


Client = Callable[..., Any]


@pytest.fixture
def client(iam_gateway: GatewayProcess, protocol: str) -> Client:
    """`client(name, region=..., secret=...)`: an SQS client of a configured principal."""

    def make(name: str, region: str = "us-east-1", secret: str | None = None) -> Any:
        key, real_secret = KEYS[name]
        credentials = {"aws_access_key_id": key, "aws_secret_access_key": secret or real_secret}
        return client_for(protocol, iam_gateway.endpoint, credentials, region, NO_RETRIES)

    return make


@pytest.fixture
def anonymous_client(iam_gateway: GatewayProcess, protocol: str) -> Any:
    config = NO_RETRIES.merge(Config(signature_version=UNSIGNED))
    return client_for(protocol, iam_gateway.endpoint, config=config)


def outcome(call: Callable[[], Any]) -> str:
    """ "ok", or the error code the call failed with."""
    try:
        call()
    except ClientError as error:
        code: str = error.response["Error"]["Code"]
        return code
    return "ok"


def failure(call: Callable[[], Any]) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as excinfo:
        call()
    response = excinfo.value.response
    return (
        response["Error"]["Code"],
        response["ResponseMetadata"]["HTTPStatusCode"],
        response["Error"]["Message"],
    )


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def arn(account: str, name: str, region: str = "us-east-1") -> str:
    return f"arn:aws:sqs:{region}:{account}:{name}"


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


# -- signatures ------------------------------------------------------------------------------


def test_a_request_signed_with_the_right_secret_is_served(client: Client) -> None:
    alice = client("alice")
    url = alice.create_queue(QueueName=unique("signed"))["QueueUrl"]
    alice.send_message(QueueUrl=url, MessageBody="hello")
    messages = alice.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in messages] == ["hello"]
    assert url.split("/")[-2] == OWNER  # the queue belongs to alice's account


def test_a_request_signed_with_a_wrong_secret_is_refused_with_signature_does_not_match(
    client: Client,
) -> None:
    code, status, message = failure(lambda: client("alice", secret="wrong").list_queues())
    assert (code, status) == ("SignatureDoesNotMatch", 403)
    assert message.startswith("The request signature we calculated does not match")


def test_an_unknown_access_key_is_refused_with_invalid_client_token_id(
    iam_gateway: GatewayProcess, protocol: str
) -> None:
    stranger = client_for(
        protocol,
        iam_gateway.endpoint,
        {"aws_access_key_id": "nobody", "aws_secret_access_key": "x"},
        config=NO_RETRIES,
    )
    code, status, message = failure(lambda: stranger.list_queues())
    assert (code, status) == ("InvalidClientTokenId", 403)
    assert message == "The security token included in the request is invalid."


def test_a_signature_older_than_15_minutes_is_refused_with_request_expired(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = client("alice")
    real_now = botocore.auth.get_current_datetime
    monkeypatch.setattr(
        botocore.auth, "get_current_datetime", lambda: real_now() - timedelta(minutes=20)
    )
    code, status, message = failure(lambda: alice.list_queues())
    assert (code, status) == ("RequestExpired", 400)
    assert message.startswith("Signature expired:")


def test_an_unsigned_request_is_refused_with_missing_authentication_token(
    anonymous_client: Any,
) -> None:
    code, status, message = failure(lambda: anonymous_client.list_queues())
    assert (code, status) == ("MissingAuthenticationToken", 403)
    assert "valid (registered) AWS access key ID" in message


def _presigned_get(url: str, protocol: str, action: str) -> tuple[int, bytes]:
    headers = (
        {
            "X-Amz-Target": f"AmazonSQS.{action}",
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-query-mode": "true",
        }
        if protocol == "json"
        else {}
    )
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_presigned_url_is_served_and_a_tampered_or_expired_one_refused(
    client: Client, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queue, and a presigned ListQueues URL for its name
    alice = client("alice")
    name = unique("presigned")
    alice.create_queue(QueueName=name)
    params = {"QueueNamePrefix": name}
    url = alice.generate_presigned_url(
        "list_queues", Params=params, ExpiresIn=300, HttpMethod="GET"
    )
    # When it is fetched as it is, Then the queue is listed
    status, body = _presigned_get(url, protocol, "ListQueues")
    assert status == 200 and name.encode() in body
    # When a parameter is changed, Then the signature no longer matches
    status, body = _presigned_get(url.replace(name, name + "x"), protocol, "ListQueues")
    assert status == 403 and b"SignatureDoesNotMatch" in body
    # When it was signed by a wrong secret, Then too
    wrong = client("alice", secret="wrong").generate_presigned_url(
        "list_queues", Params=params, ExpiresIn=300, HttpMethod="GET"
    )
    status, body = _presigned_get(wrong, protocol, "ListQueues")
    assert status == 403 and b"SignatureDoesNotMatch" in body
    # When it was signed 10 minutes ago for 5 minutes, Then it has expired
    real_now = botocore.auth.get_current_datetime
    monkeypatch.setattr(
        botocore.auth, "get_current_datetime", lambda: real_now() - timedelta(minutes=10)
    )
    old = alice.generate_presigned_url(
        "list_queues", Params=params, ExpiresIn=300, HttpMethod="GET"
    )
    status, body = _presigned_get(old, protocol, "ListQueues")
    assert status == 400 and b"RequestExpired" in body


# -- the policy matrix: alice's queue, other principals --------------------------------------


@pytest.fixture(scope="module")
def matrix_queues() -> dict[str, str]:
    return {}


@pytest.fixture
def owned_queue(client: Client, protocol: str, matrix_queues: dict[str, str]) -> str:
    """One queue of the owner account per protocol; each matrix case sets its policy."""
    if protocol not in matrix_queues:
        matrix_queues[protocol] = client("alice").create_queue(QueueName=unique("matrix"))[
            "QueueUrl"
        ]
    return matrix_queues[protocol]


def _statement(
    principal: Any, action: Any, effect: str = "Allow", **condition: Any
) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Effect": effect,
        "Principal": principal if principal == "*" else {"AWS": principal},
        "Action": action,
    }
    if condition:
        statement["Condition"] = condition
    return statement


BOB_ACCOUNT = {"AWS": PARTNER}
MATRIX = [
    # (case, statements, caller, action, expected outcome)
    ("no policy: cross-account refused", [], "bob", "send", "AccessDenied"),
    ("allow: granted action", [_statement(PARTNER, "sqs:SendMessage")], "bob", "send", "ok"),
    ("allow: batch twin", [_statement(PARTNER, "sqs:SendMessage")], "bob", "send_batch", "ok"),
    (
        "allow: other action refused",
        [_statement(PARTNER, "sqs:SendMessage")],
        "bob",
        "receive",
        "AccessDenied",
    ),
    (
        "deny wins over allow",
        [_statement(PARTNER, "sqs:*"), _statement(PARTNER, "sqs:ReceiveMessage", "Deny")],
        "bob",
        "receive",
        "AccessDenied",
    ),
    (
        "deny leaves the rest",
        [_statement(PARTNER, "sqs:*"), _statement(PARTNER, "sqs:ReceiveMessage", "Deny")],
        "bob",
        "send",
        "ok",
    ),
    ("wildcard action", [_statement(PARTNER, "sqs:Send*")], "bob", "send", "ok"),
    (
        "wildcard action misses",
        [_statement(PARTNER, "sqs:Send*")],
        "bob",
        "receive",
        "AccessDenied",
    ),
    (
        "SourceIp condition true",
        [_statement(PARTNER, "sqs:*", IpAddress={"aws:SourceIp": "127.0.0.1/32"})],
        "bob",
        "send",
        "ok",
    ),
    (
        "SourceIp condition false",
        [_statement(PARTNER, "sqs:*", IpAddress={"aws:SourceIp": "10.0.0.0/8"})],
        "bob",
        "send",
        "AccessDenied",
    ),
    (
        "DateLessThan condition true",
        [_statement(PARTNER, "sqs:*", DateLessThan={"aws:CurrentTime": "2099-01-01T00:00Z"})],
        "bob",
        "receive",
        "ok",
    ),
    (
        "DateLessThan condition false",
        [_statement(PARTNER, "sqs:*", DateLessThan={"aws:CurrentTime": "2009-06-30T12:00Z"})],
        "bob",
        "receive",
        "AccessDenied",
    ),
    (
        "user ARN principal",
        [_statement(f"arn:aws:iam::{PARTNER}:user/bob", "sqs:SendMessage")],
        "bob",
        "send",
        "ok",
    ),
    (
        "another account is not granted",
        [_statement(PARTNER, "sqs:*")],
        "carol",
        "send",
        "AccessDenied",
    ),
    ("anonymous with *", [_statement("*", "sqs:SendMessage")], "anonymous", "send", "ok"),
    (
        "anonymous, action not granted",
        [_statement("*", "sqs:SendMessage")],
        "anonymous",
        "receive",
        "MissingAuthenticationToken",
    ),
    (
        "anonymous, account principal",
        [_statement(PARTNER, "sqs:*")],
        "anonymous",
        "send",
        "MissingAuthenticationToken",
    ),
    ("same account, identity lacks it", [], "reader", "send", "AccessDenied"),
    ("same account, identity allows", [], "reader", "receive", "ok"),
    (
        "same account, queue policy allows",
        [_statement(f"arn:aws:iam::{OWNER}:user/reader", "sqs:SendMessage")],
        "reader",
        "send",
        "ok",
    ),
    (
        "same account, identity deny wins",
        [_statement(f"arn:aws:iam::{OWNER}:user/blocked", "sqs:SendMessage")],
        "blocked",
        "send",
        "AccessDenied",
    ),
    ("owner root may do anything", [], "owner-root", "receive", "ok"),
    (
        "owner root, queue policy deny",
        [_statement(OWNER, "sqs:SendMessage", "Deny")],
        "owner-root",
        "send",
        "AccessDenied",
    ),
]


@pytest.mark.parametrize(
    ("statements", "caller", "action", "expected"),
    [case[1:] for case in MATRIX],
    ids=[case[0] for case in MATRIX],
)
def test_policy_matrix(
    client: Client,
    anonymous_client: Any,
    owned_queue: str,
    statements: list[dict[str, Any]],
    caller: str,
    action: str,
    expected: str,
) -> None:
    # Given alice's queue with this policy (none when there are no statements)
    alice = client("alice")
    resource = arn(OWNER, owned_queue.rsplit("/", 1)[1])
    text = policy(*({**s, "Resource": resource} for s in statements)) if statements else ""
    alice.set_queue_attributes(QueueUrl=owned_queue, Attributes={"Policy": text})
    sqs = anonymous_client if caller == "anonymous" else client(caller)
    calls: dict[str, Callable[[], Any]] = {
        "send": lambda: sqs.send_message(QueueUrl=owned_queue, MessageBody="m"),
        "send_batch": lambda: sqs.send_message_batch(
            QueueUrl=owned_queue, Entries=[{"Id": "1", "MessageBody": "m"}]
        ),
        "receive": lambda: sqs.receive_message(QueueUrl=owned_queue, WaitTimeSeconds=0),
    }
    # When the caller acts on it, Then
    assert outcome(calls[action]) == expected


def test_access_denied_names_the_queue_url(
    client: Client, owned_queue: str, iam_gateway: GatewayProcess
) -> None:
    client("alice").set_queue_attributes(QueueUrl=owned_queue, Attributes={"Policy": ""})
    code, status, message = failure(
        lambda: client("bob").send_message(QueueUrl=owned_queue, MessageBody="m")
    )
    name = owned_queue.rsplit("/", 1)[1]
    assert (code, status) == ("AccessDenied", 403)
    assert message == f"Access to the resource {iam_gateway.endpoint}/{OWNER}/{name} is denied."


# -- cross-account: GetQueueUrl, attributes, owner-only actions --------------------------------


def test_get_queue_url_of_another_account_works_exactly_when_a_policy_allows(
    client: Client,
) -> None:
    alice, bob = client("alice"), client("bob")
    name = unique("shared")
    url = alice.create_queue(QueueName=name)["QueueUrl"]
    assert outcome(lambda: bob.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER)) == (
        "AccessDenied"
    )
    alice.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "Policy": policy(
                {**_statement(PARTNER, "sqs:GetQueueUrl"), "Resource": arn(OWNER, name)}
            )
        },
    )
    found = bob.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER)["QueueUrl"]
    assert found == url
    # and without the owner account, bob's own account is meant: no such queue there
    assert outcome(lambda: bob.get_queue_url(QueueName=name)) == (
        "AWS.SimpleQueueService.NonExistentQueue"
    )


def test_another_account_reads_attributes_but_not_the_policy(client: Client) -> None:
    alice, bob = client("alice"), client("bob")
    name = unique("attrs")
    url = alice.create_queue(QueueName=name)["QueueUrl"]
    granted = policy(
        {**_statement(PARTNER, "sqs:GetQueueAttributes"), "Resource": arn(OWNER, name)}
    )
    alice.set_queue_attributes(QueueUrl=url, Attributes={"Policy": granted})
    seen = bob.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in seen and seen["QueueArn"] == arn(OWNER, name)
    own = alice.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]
    assert json.loads(own["Policy"]) == json.loads(granted)


def test_owner_only_actions_are_refused_to_another_account_even_with_a_star_policy(
    client: Client,
) -> None:
    alice, bob = client("alice"), client("bob")
    name = unique("owner-only")
    url = alice.create_queue(QueueName=name)["QueueUrl"]
    alice.set_queue_attributes(
        QueueUrl=url,
        Attributes={"Policy": policy({**_statement("*", "sqs:*"), "Resource": arn(OWNER, name)})},
    )
    assert outcome(lambda: bob.send_message(QueueUrl=url, MessageBody="m")) == "ok"
    for call in (
        lambda: bob.add_permission(
            QueueUrl=url, Label="mine", AWSAccountIds=[PARTNER], Actions=["*"]
        ),
        lambda: bob.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "1"}),
        lambda: bob.delete_queue(QueueUrl=url),
        lambda: bob.tag_queue(QueueUrl=url, Tags={"a": "b"}),
    ):
        assert outcome(call) == "AccessDenied"


# -- AddPermission / RemovePermission ---------------------------------------------------------


def test_add_permission_grants_another_account_until_remove_permission(client: Client) -> None:
    # Given alice's queue that bob may not use
    alice, bob = client("alice"), client("bob")
    name = unique("perm")
    url = alice.create_queue(QueueName=name)["QueueUrl"]
    assert outcome(lambda: bob.send_message(QueueUrl=url, MessageBody="m")) == "AccessDenied"
    # When alice lets bob's account send and receive
    alice.add_permission(
        QueueUrl=url,
        Label="PartnerSendReceive",
        AWSAccountIds=[PARTNER],
        Actions=["SendMessage", "ReceiveMessage"],
    )
    # Then bob sends, also in batches, and receives, but may not purge
    bob.send_message(QueueUrl=url, MessageBody="one")
    batch = bob.send_message_batch(QueueUrl=url, Entries=[{"Id": "2", "MessageBody": "two"}])
    assert [e["Id"] for e in batch["Successful"]] == ["2"]
    bodies = {
        m["Body"]
        for m in bob.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)[
            "Messages"
        ]
    }
    assert bodies <= {"one", "two"} and bodies
    assert outcome(lambda: bob.purge_queue(QueueUrl=url)) == "AccessDenied"
    # and the policy is the generated one
    document = json.loads(
        alice.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    )
    assert document["Statement"] == [
        {
            "Sid": "PartnerSendReceive",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{PARTNER}:root"},
            "Action": ["SQS:SendMessage", "SQS:ReceiveMessage"],
            "Resource": arn(OWNER, name),
        }
    ]
    # When the permission is removed
    alice.remove_permission(QueueUrl=url, Label="PartnerSendReceive")
    # Then bob is refused again, and the queue has no policy left
    assert outcome(lambda: bob.send_message(QueueUrl=url, MessageBody="m")) == "AccessDenied"
    attributes = alice.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in attributes


def test_add_and_remove_permission_errors(client: Client) -> None:
    alice = client("alice")
    url = alice.create_queue(QueueName=unique("perm-errors"))["QueueUrl"]
    alice.add_permission(
        QueueUrl=url, Label="test", AWSAccountIds=[PARTNER], Actions=["ReceiveMessage"]
    )
    assert failure(
        lambda: alice.add_permission(
            QueueUrl=url, Label="test", AWSAccountIds=[PARTNER], Actions=["SendMessage"]
        )
    ) == (
        "InvalidParameterValue",
        400,
        "Value test for parameter Label is invalid. Reason: Already exists.",
    )
    assert failure(
        lambda: alice.add_permission(
            QueueUrl=url, Label="t2", AWSAccountIds=[PARTNER], Actions=["RemovePermission"]
        )
    ) == (
        "InvalidParameterValue",
        400,
        "Value SQS:RemovePermission for parameter ActionName is invalid. Reason: Only the queue owner is allowed to invoke this action.",
    )
    eight = [
        "SendMessage",
        "ReceiveMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "GetQueueAttributes",
        "GetQueueUrl",
        "PurgeQueue",
        "*",
    ]
    assert failure(
        lambda: alice.add_permission(
            QueueUrl=url, Label="t3", AWSAccountIds=[PARTNER], Actions=eight
        )
    ) == ("OverLimit", 403, "8 Actions were found, maximum allowed is 7.")
    assert failure(lambda: alice.remove_permission(QueueUrl=url, Label="nope")) == (
        "InvalidParameterValue",
        400,
        "Value nope for parameter Label is invalid. Reason: can't find label.",
    )


# -- ListQueues and the administrator -------------------------------------------------------------


def test_list_queues_shows_only_the_callers_account_and_the_admin_sees_all(client: Client) -> None:
    # Given a queue in alice's account and one in bob's with a common prefix
    prefix = unique("tenant")
    alice_url = client("alice").create_queue(QueueName=f"{prefix}-a")["QueueUrl"]
    bob_url = client("bob").create_queue(QueueName=f"{prefix}-b")["QueueUrl"]
    # Then each lists its own, and the administrator both
    assert client("alice").list_queues(QueueNamePrefix=prefix)["QueueUrls"] == [alice_url]
    assert client("bob").list_queues(QueueNamePrefix=prefix)["QueueUrls"] == [bob_url]
    assert sorted(client("ops").list_queues(QueueNamePrefix=prefix)["QueueUrls"]) == sorted(
        [alice_url, bob_url]
    )


def test_the_admin_purges_and_deletes_any_accounts_queue_but_others_may_not(client: Client) -> None:
    # Given bob's queue with a message
    bob, ops, carol = client("bob"), client("ops"), client("carol")
    name = unique("admin")
    url = bob.create_queue(QueueName=name)["QueueUrl"]
    bob.send_message(QueueUrl=url, MessageBody="m")
    # Then carol may neither purge nor delete it
    assert outcome(lambda: carol.purge_queue(QueueUrl=url)) == "AccessDenied"
    assert outcome(lambda: carol.delete_queue(QueueUrl=url)) == "AccessDenied"
    # and the administrator may do both, and read its attributes, but not its messages
    ops.purge_queue(QueueUrl=url)
    counts = ops.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "0"
    assert outcome(lambda: ops.receive_message(QueueUrl=url)) == "AccessDenied"
    ops.delete_queue(QueueUrl=url)
    assert outcome(lambda: bob.get_queue_url(QueueName=name)) == (
        "AWS.SimpleQueueService.NonExistentQueue"
    )


# -- the seed's policy examples, loaded as queue policies ---------------------------------------


def _seed_queue(owner_client: Any, owner: str, seed_text: str, seed_name: str) -> tuple[str, str]:
    """A new queue of `owner` with the seed policy, its queue name replaced by the new one."""
    name = unique(seed_name)
    url = owner_client.create_queue(QueueName=name)["QueueUrl"]
    text = seed_text.replace(f':{owner}:{seed_name}"', f':{owner}:{name}"')
    owner_client.set_queue_attributes(QueueUrl=url, Attributes={"Policy": text})
    return url, name


def test_seed_example_send_message_for_one_account(client: Client) -> None:
    # Resource arn:aws:sqs:cn-north-1:444455556666:queue1: callers sign for cn-north-1
    alice = client("alice", "cn-north-1")
    url, name = _seed_queue(alice, OWNER, seed.EXAMPLE_SEND, "queue1")
    bob, carol = client("bob", "cn-north-1"), client("carol", "cn-north-1")
    assert outcome(lambda: bob.send_message(QueueUrl=url, MessageBody="m")) == "ok"
    assert outcome(lambda: bob.receive_message(QueueUrl=url)) == "AccessDenied"
    assert outcome(lambda: carol.send_message(QueueUrl=url, MessageBody="m")) == "AccessDenied"
    # a request signed for another region is for that region's queue of the name: none
    bob_elsewhere = client("bob", "us-east-1")
    assert outcome(lambda: bob_elsewhere.send_message(QueueUrl=url, MessageBody="m")) == (
        "AWS.SimpleQueueService.NonExistentQueue"
    )
    # and where one exists with the same policy, the statement's resource (cn-north-1) does
    # not match it
    alice_elsewhere = client("alice", "us-east-1")
    alice_elsewhere.create_queue(QueueName=name)
    policy = alice.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]
    alice_elsewhere.set_queue_attributes(QueueUrl=url, Attributes=policy)
    assert outcome(lambda: bob_elsewhere.send_message(QueueUrl=url, MessageBody="m")) == (
        "AccessDenied"
    )


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_seed_example_send_and_receive_in_any_region(client: Client, region: str) -> None:
    # Resource arn:aws:sqs:*:444455556666:queue1: the queue of that name in every region
    url, _ = _seed_queue(client("alice", region), OWNER, seed.EXAMPLE_SEND_RECEIVE, "queue1")
    bob = client("bob", region)
    assert outcome(lambda: bob.send_message(QueueUrl=url, MessageBody="m")) == "ok"
    assert outcome(lambda: bob.receive_message(QueueUrl=url, WaitTimeSeconds=5)) == "ok"
    assert outcome(lambda: bob.delete_message(QueueUrl=url, ReceiptHandle="x")) == "AccessDenied"


def test_seed_example_two_accounts_all_actions(client: Client) -> None:
    url, _ = _seed_queue(
        client("carol", "cn-north-1"), THIRD, seed.EXAMPLE_TWO_ACCOUNTS_ALL_ACTIONS, "queue1"
    )
    # bob's identity policy allows sqs:* anywhere; 444455556666's own credentials need none
    for name in ("bob", "owner-root"):
        caller = client(name, "cn-north-1")
        caller.send_message(QueueUrl=url, MessageBody="m")
        caller.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    ops = client("ops", "cn-north-1")
    assert outcome(lambda: ops.send_message(QueueUrl=url, MessageBody="m")) == "AccessDenied"


def test_seed_example_anonymous_receive(client: Client, anonymous_client: Any) -> None:
    url, _ = _seed_queue(client("bob"), PARTNER, seed.EXAMPLE_ANONYMOUS_RECEIVE, "queue1")
    client("bob").send_message(QueueUrl=url, MessageBody="for everyone")
    received = anonymous_client.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in received] == ["for everyone"]
    assert outcome(lambda: anonymous_client.send_message(QueueUrl=url, MessageBody="m")) == (
        "MissingAuthenticationToken"
    )
    # "all users": a signed caller of any account too
    assert outcome(lambda: client("carol").receive_message(QueueUrl=url)) == "ok"


def test_seed_example_anonymous_receive_only_on_31_january_2009(
    client: Client, anonymous_client: Any
) -> None:
    url, _ = _seed_queue(
        client("bob"), PARTNER, seed.EXAMPLE_ANONYMOUS_RECEIVE_TIME_LIMIT, "queue1"
    )
    assert outcome(lambda: anonymous_client.receive_message(QueueUrl=url)) == (
        "MissingAuthenticationToken"
    )


@pytest.mark.parametrize(
    "seed_text", [seed.EXAMPLE_ANONYMOUS_ALL_ACTIONS_IP, seed.EXAMPLE_IP_ALLOW_AND_DENY]
)
def test_seed_examples_by_network_refuse_a_caller_outside_it(
    client: Client, anonymous_client: Any, seed_text: str
) -> None:
    url, _ = _seed_queue(client("bob"), PARTNER, seed_text, "queue1")
    assert outcome(lambda: anonymous_client.send_message(QueueUrl=url, MessageBody="m")) == (
        "MissingAuthenticationToken"
    )


def test_seed_example_sns_topic_to_queue(client: Client) -> None:
    # Given the seed's policy: anyone, but only with the topic as aws:SourceArn (a request
    # names it in the X-Amz-Source-Arn header); its resource is in cn-north-1
    url, _ = _seed_queue(
        client("bob", "cn-north-1"), PARTNER, seed.EXAMPLE_SNS_TO_SQS, "test-topic-queue"
    )
    topic = "arn:aws:sns:cn-north-1:111122223333:test-topic"

    def add_source(request: Any, **_: Any) -> None:
        request.headers["X-Amz-Source-Arn"] = topic

    carol = client("carol", "cn-north-1")
    # Then a sender without the source ARN is refused
    assert outcome(lambda: carol.send_message(QueueUrl=url, MessageBody="m")) == "AccessDenied"
    # and one that names the topic is allowed
    carol.meta.events.register("before-send.sqs.SendMessage", add_source)
    assert outcome(lambda: carol.send_message(QueueUrl=url, MessageBody="from the topic")) == "ok"


# -- aws:SourceIp end to end, from chosen loopback addresses ------------------------------------


def _raw_query(
    endpoint: str,
    params: dict[str, str],
    source_ip: str,
    credentials: tuple[str, str] | None = None,
) -> tuple[int, bytes]:
    """A Query request from `source_ip` (any 127/8 address), signed by botocore if asked."""
    parts = urlsplit(endpoint)
    body = urlencode({**params, "Version": "2012-11-05"}).encode()
    request = AWSRequest(
        method="POST",
        url=endpoint + "/",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    if credentials is not None:
        SigV4Auth(Credentials(*credentials), "sqs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    connection = http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port, timeout=10, source_address=(source_ip, 0)
    )
    try:
        connection.request("POST", "/", body=body, headers=dict(prepared.headers))
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_source_ip_conditions_of_the_seed_example_with_loopback_networks(
    client: Client, iam_gateway: GatewayProcess
) -> None:
    # Given the seed's two-statement policy with its networks moved to loopback ones:
    # send allowed from 127.0.0.0/24 except 127.0.0.188, everything denied from 127.0.1.0/24
    bob = client("bob")
    text = seed.EXAMPLE_IP_ALLOW_AND_DENY.replace("192.168.143", "127.0.0").replace(
        "10.1.2", "127.0.1"
    )
    url, _ = _seed_queue(bob, PARTNER, text, "queue1")
    send = {"Action": "SendMessage", "QueueUrl": url, "MessageBody": "m"}
    endpoint = iam_gateway.endpoint
    # Then an anonymous sender from inside the network is allowed, the excepted one is not
    assert _raw_query(endpoint, send, "127.0.0.10")[0] == 200
    status, body = _raw_query(endpoint, send, "127.0.0.188")
    assert status == 403 and b"MissingAuthenticationToken" in body
    # and even the queue's owner account is explicitly denied from the denied network
    status, body = _raw_query(endpoint, send, "127.0.1.5", KEYS["bob"])
    assert status == 403 and b"AccessDenied" in body
    assert _raw_query(endpoint, send, "127.0.0.20", KEYS["bob"])[0] == 200


# -- the local-server habit: any access key ---------------------------------------------------


@pytest.fixture(scope="module")
def any_key_gateway(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = GatewayProcess(
        tmp_path_factory.mktemp("any-key-gateway"),
        kafka_bootstrap,
        env={"KQS_ACCEPT_ANY_ACCESS_KEY": "1"},
    )
    process.start()
    yield process
    process.stop()


def test_accept_any_access_key_lets_unknown_keys_act_as_the_default_account_and_warns(
    any_key_gateway: GatewayProcess, protocol: str
) -> None:
    stranger = client_for(
        protocol,
        any_key_gateway.endpoint,
        {"aws_access_key_id": f"key-{uuid.uuid4().hex[:6]}", "aws_secret_access_key": "anything"},
        config=NO_RETRIES,
    )
    url = stranger.create_queue(QueueName=unique("any-key"))["QueueUrl"]
    assert url.split("/")[-2] == "000000000000"
    # the configured test/test key is still verified
    wrong = client_for(
        protocol,
        any_key_gateway.endpoint,
        {"aws_access_key_id": "test", "aws_secret_access_key": "wrong"},
        config=NO_RETRIES,
    )
    assert outcome(lambda: wrong.list_queues()) == "SignatureDoesNotMatch"
    log = Path(any_key_gateway.log_path).read_text()
    assert "ACCEPTING ANY ACCESS KEY" in log


def test_the_embedded_default_announces_its_credentials(gateway: GatewayProcess) -> None:
    log = Path(gateway.log_path).read_text()
    assert "embedded default credentials" in log and "access key test, secret test" in log


# -- references to other accounts' queues inside a request -------------------------------------


def test_a_dead_letter_queue_of_another_account_is_refused(client: Client) -> None:
    alice, bob = client("alice"), client("bob")
    alice_dlq = alice.create_queue(QueueName=unique("alice-dlq"))["QueueUrl"]
    redrive = json.dumps(
        {"deadLetterTargetArn": arn(OWNER, alice_dlq.rsplit("/", 1)[1]), "maxReceiveCount": 3}
    )
    code, status, message = failure(
        lambda: bob.create_queue(QueueName=unique("bob-src"), Attributes={"RedrivePolicy": redrive})
    )
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message.endswith("Reason: Dead-letter target owner should be same as the source.")


def test_a_move_task_needs_send_message_on_another_accounts_destination(client: Client) -> None:
    # Given bob's dead-letter queue with a source, and alice's queue as a destination
    alice, bob = client("alice"), client("bob")
    dlq = bob.create_queue(QueueName=unique("bob-dlq"))["QueueUrl"]
    dlq_arn = arn(PARTNER, dlq.rsplit("/", 1)[1])
    bob.create_queue(
        QueueName=unique("bob-src"),
        Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
        },
    )
    destination = alice.create_queue(QueueName=unique("alice-dest"))["QueueUrl"]
    destination_arn = arn(OWNER, destination.rsplit("/", 1)[1])
    # Then bob may not move messages into alice's queue
    assert (
        outcome(
            lambda: bob.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destination_arn)
        )
        == "AccessDenied"
    )
    # until alice lets bob's account send to it
    alice.add_permission(
        QueueUrl=destination, Label="moves", AWSAccountIds=[PARTNER], Actions=["SendMessage"]
    )
    handle = bob.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destination_arn)[
        "TaskHandle"
    ]
    # and carol may neither list nor cancel bob's task
    carol = client("carol")
    assert outcome(lambda: carol.list_message_move_tasks(SourceArn=dlq_arn)) == "AccessDenied"
    assert outcome(lambda: carol.cancel_message_move_task(TaskHandle=handle)) == "AccessDenied"
