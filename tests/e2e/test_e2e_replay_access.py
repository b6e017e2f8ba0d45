"""Who may replay and browse a queue: its owner and the administrator, and whoever a policy
grants the actions' own names (sqs:StartMessageReplayTask, sqs:PeekMessages, ...); a replay
into another queue also needs SendMessage there. Both protocols."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import GatewayProcess
from tests.support.replay import replay_client

OWNER, PARTNER, OPS = "444455556666", "111122223333", "999999999999"
KEYS = {
    "owner": ("owner-root", "owner-root-secret"),
    "reader": ("reader", "reader-secret"),
    "bob": ("bob", "bob-secret"),
    "ops": ("ops", "ops-secret"),
}
ALL_SQS = '{"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}}'
CONFIG = f"""
default_account = "{OWNER}"

[[accounts]]
id = "{OWNER}"
access_key_id = "owner-root"
secret_access_key = "owner-root-secret"

[[accounts.users]]
name = "reader"
access_key_id = "reader"
secret_access_key = "reader-secret"
policies = ['''{{"Version": "2012-10-17", "Statement": {{"Effect": "Allow",
  "Action": ["sqs:ReceiveMessage", "sqs:SendMessage"], "Resource": "*"}}}}''']

[[accounts]]
id = "{PARTNER}"

[[accounts.users]]
name = "bob"
access_key_id = "bob"
secret_access_key = "bob-secret"
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
    data_dir = tmp_path_factory.mktemp("replay-iam-gateway")
    config = data_dir / "iam.toml"
    config.write_text(CONFIG)
    process = GatewayProcess(data_dir, kafka_bootstrap, env={"KQS_IAM_CONFIG": str(config)})
    process.start()
    yield process
    process.stop()


Client = Callable[[str], Any]


@pytest.fixture
def client(iam_gateway: GatewayProcess, protocol: str) -> Client:
    def make(name: str) -> Any:
        key, secret = KEYS[name]
        credentials = {"aws_access_key_id": key, "aws_secret_access_key": secret}
        return replay_client(protocol, iam_gateway.endpoint, credentials)

    return make


def outcome(call: Callable[[], Any]) -> str:
    try:
        call()
    except ClientError as error:
        code: str = error.response["Error"]["Code"]
        return code
    return "ok"


def test_owner_and_administrator_may_and_others_only_when_a_policy_grants_it(
    client: Client,
) -> None:
    # Given a queue of the owner's, with one message, and one of the partner's
    owner, reader, bob, ops = (client(n) for n in ("owner", "reader", "bob", "ops"))
    url = owner.create_queue(QueueName=f"guarded-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    since_ms = int(time.time() * 1000) - 1000
    owner.send_message(QueueUrl=url, MessageBody="secret")
    bobs = bob.create_queue(QueueName=f"bobs-{uuid.uuid4().hex[:10]}")["QueueUrl"]

    def peek(who: Any) -> str:
        return outcome(lambda: who.peek_messages(QueueUrl=url))

    def start(who: Any, **more: Any) -> str:
        return outcome(
            lambda: who.start_message_replay_task(QueueUrl=url, SinceTimestamp=since_ms, **more)
        )

    def listed(who: Any) -> str:
        return outcome(lambda: who.list_message_replay_tasks(QueueUrl=url))

    # Then the owner and the administrator may; a user of the owner's account whose policies
    # do not name the actions, and another account, may not
    assert (peek(owner), start(owner), listed(owner)) == ("ok", "ok", "ok")
    assert (peek(ops), start(ops), listed(ops)) == ("ok", "ok", "ok")
    assert (peek(reader), start(reader), listed(reader)) == ("AccessDenied",) * 3
    assert (peek(bob), start(bob), listed(bob)) == ("AccessDenied",) * 3
    handle = owner.list_message_replay_tasks(QueueUrl=url)["Tasks"][0]["TaskHandle"]
    assert outcome(lambda: bob.cancel_message_replay_task(TaskHandle=handle)) == "AccessDenied"

    # When the queue's policy grants the partner browsing and replaying, not sending
    arn = owner.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = {
        "Version": "2012-10-17",
        "Statement": {
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{PARTNER}:root"},
            "Action": ["sqs:PeekMessages", "sqs:StartMessageReplayTask"],
            "Resource": arn,
        },
    }
    owner.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})

    # Then the partner may browse, and replay into a queue it may send to (its own), but
    # not into the owner's queue itself, and still may not list the tasks
    assert peek(bob) == "ok"
    assert start(bob) == "AccessDenied"  # the destination is the source: SendMessage there
    assert start(bob, DestinationQueueUrl=bobs) == "ok"
    assert listed(bob) == "AccessDenied"
    back = bob.receive_message(QueueUrl=bobs, WaitTimeSeconds=5, AttributeNames=["All"])
    assert [m["Body"] for m in back.get("Messages", [])] == ["secret"]
