"""The AWS CDK against the gateway: `cdk deploy` of a small app (a queue, its dead-letter queue
and a policy; tests/e2e/cloudformation/cdk/app.js) with a synthesizer that needs no bootstrap
stack, then `cdk destroy`. The CDK CLI asks STS who it is (GetCallerIdentity), tries to assume
the bootstrap deploy role (refused, and it proceeds with the caller's credentials, as against
an unbootstrapped account), and deploys through change sets.

The heavy test of the CloudFormation suite: aws-cdk and aws-cdk-lib come from npm (~200 MB,
once per lock hash into the KQS cache) and one synth loads aws-cdk-lib.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.clients_support import require_tool
from tests.support.cloudformation import (
    CDK_APP,
    cdk_env,
    cdk_node_modules,
    cloudformation_client,
    queue_exists,
    stack_name,
)
from tests.support.harness import GatewayProcess, json_client

CDK_TIMEOUT_S = 600


def _cdk(node: str, work: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [node, str(work / "node_modules" / "aws-cdk" / "bin" / "cdk"), *args, "--no-notices"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=CDK_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"cdk {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def test_cdk_deploys_and_destroys_a_queue_its_dead_letter_queue_and_a_policy(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    # Given the CDK app with its node_modules
    node = require_tool("node", "npm")["node"]
    modules = cdk_node_modules()
    work = tmp_path / "app"
    work.mkdir()
    for name in ("app.js", "cdk.json"):
        shutil.copy2(CDK_APP / name, work / name)
    (work / "node_modules").symlink_to(modules)
    name = stack_name("cdk")
    env = {**cdk_env(gateway.endpoint), "KQS_CDK_STACK": name}
    # When `cdk deploy` runs it
    _cdk(node, work, env, "deploy", "--require-approval", "never", "--output", "cdk.out")
    # Then the stack is complete and its queues are what the app says, as SQS reports them
    cfn = cloudformation_client(gateway.endpoint)
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    sqs: Any = json_client(gateway.endpoint)
    orders = sqs.get_queue_attributes(QueueUrl=outputs["OrdersUrl"], AttributeNames=["All"])[
        "Attributes"
    ]
    assert orders["VisibilityTimeout"] == "45"
    redrive = json.loads(orders["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == outputs["DeadLettersArn"]
    assert int(redrive["maxReceiveCount"]) == 5
    statement = json.loads(orders["Policy"])["Statement"][0]
    assert statement["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    dead_letters_name = outputs["DeadLettersArn"].rsplit(":", 1)[1]
    dead_letters_url = f"{gateway.endpoint}/000000000000/{dead_letters_name}"
    retention = sqs.get_queue_attributes(
        QueueUrl=dead_letters_url, AttributeNames=["MessageRetentionPeriod"]
    )["Attributes"]["MessageRetentionPeriod"]
    assert retention == str(14 * 24 * 3600)
    # When `cdk destroy` removes it (from the synthesized app: no second synth)
    _cdk(node, work, env, "destroy", "--app", "cdk.out", "--force")
    # Then the queues are gone
    assert not queue_exists(sqs, outputs["OrdersUrl"])
    assert not queue_exists(sqs, dead_letters_url)
