"""The AWS CLI's CloudFormation commands, unchanged, against the gateway: `deploy` of a YAML
template with parameter overrides (create, update, "No changes to deploy"), create-stack /
update-stack / delete-stack with the `wait` commands, describe-stack-events, and a template
that fails half-way. The queues are checked through SQS afterwards."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.aws_cli import AWS, run_aws
from tests.support.cloudformation import APP_TEMPLATE, queue_exists, stack_name
from tests.support.harness import GatewayProcess, json_client


def aws(
    gateway: GatewayProcess, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = run_aws(gateway.endpoint, "cloudformation", *args, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"aws cloudformation {' '.join(args)} failed: {done.stderr}")
    return done


def aws_json(gateway: GatewayProcess, *args: str) -> Any:
    return json.loads(aws(gateway, *args).stdout)


def _outputs(gateway: GatewayProcess, name: str) -> dict[str, str]:
    stack = aws_json(gateway, "describe-stacks", "--stack-name", name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def _physical_ids(gateway: GatewayProcess, name: str) -> dict[str, str]:
    listed = aws_json(gateway, "list-stack-resources", "--stack-name", name)
    return {
        r["LogicalResourceId"]: r["PhysicalResourceId"] for r in listed["StackResourceSummaries"]
    }


@pytest.fixture(scope="module", autouse=True)
def _cli_installed() -> None:
    assert AWS.exists(), f"the AWS CLI is installed with the test extra; not found at {AWS}"


@pytest.fixture(scope="module")
def sqs_json(gateway: GatewayProcess) -> Any:
    return json_client(gateway.endpoint)


def test_deploy_creates_updates_reports_no_changes_and_delete_removes(
    gateway: GatewayProcess, sqs_json: Any, tmp_path: Path
) -> None:
    # Given the realistic YAML template in a file
    template = tmp_path / "app.yaml"
    template.write_text(APP_TEMPLATE)
    name = stack_name("deploy")
    deploy = ("deploy", "--template-file", str(template), "--stack-name", name)
    # When `deploy` creates the stack with parameter overrides
    created = aws(
        gateway, *deploy, "--parameter-overrides", "VisibilityTimeout=45", "Environment=prod"
    )
    # Then the CLI reports success and the queues are as the template says
    assert f"Successfully created/updated stack - {name}" in created.stdout
    orders_url = _outputs(gateway, name)["OrdersUrl"]
    attributes = sqs_json.get_queue_attributes(QueueUrl=orders_url, AttributeNames=["All"])[
        "Attributes"
    ]
    assert (attributes["VisibilityTimeout"], attributes["ReceiveMessageWaitTimeSeconds"]) == (
        "45",
        "20",
    )
    queues = _physical_ids(gateway, name)
    assert set(queues) == {"DeadLetters", "Orders", "Ledger", "PartnerMaySend"}
    dead_letters = sqs_json.get_queue_attributes(
        QueueUrl=queues["DeadLetters"], AttributeNames=["MessageRetentionPeriod"]
    )["Attributes"]
    assert dead_letters["MessageRetentionPeriod"] == "1209600"  # prod's, from the mapping

    # When a changed override is deployed (the other parameters keep their values)
    aws(gateway, *deploy, "--parameter-overrides", "VisibilityTimeout=90")
    # Then the same queue changed in place
    assert _outputs(gateway, name)["OrdersUrl"] == orders_url
    attributes = sqs_json.get_queue_attributes(QueueUrl=orders_url, AttributeNames=["All"])[
        "Attributes"
    ]
    assert (attributes["VisibilityTimeout"], attributes["ReceiveMessageWaitTimeSeconds"]) == (
        "90",
        "20",
    )

    # And deploying it again changes nothing, as the CLI tells against AWS
    unchanged = aws(gateway, *deploy, "--no-fail-on-empty-changeset")
    assert f"No changes to deploy. Stack {name} is up to date" in unchanged.stdout

    # When the stack is deleted and waited for
    aws(gateway, "delete-stack", "--stack-name", name)
    aws(gateway, "wait", "stack-delete-complete", "--stack-name", name)
    # Then its queues are gone, except the one kept by DeletionPolicy: Retain
    assert not queue_exists(sqs_json, orders_url)
    assert not queue_exists(sqs_json, queues["DeadLetters"])
    assert queue_exists(sqs_json, queues["Ledger"])
    sqs_json.delete_queue(QueueUrl=queues["Ledger"])


def test_create_update_delete_stack_with_the_wait_commands_and_events(
    gateway: GatewayProcess, sqs_json: Any, tmp_path: Path
) -> None:
    # Given a JSON template of a queue with a dead-letter queue and an inline policy
    name = stack_name("cli")
    document: dict[str, Any] = {
        "Parameters": {"Timeout": {"Type": "Number", "Default": 30}},
        "Resources": {
            "Dlq": {"Type": "AWS::SQS::Queue"},
            "Work": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "VisibilityTimeout": {"Ref": "Timeout"},
                    "RedrivePolicy": {
                        "Fn::Sub": '{"deadLetterTargetArn":"${Dlq.Arn}","maxReceiveCount":3}'
                    },
                },
            },
            "WorkPolicy": {
                "Type": "AWS::SQS::QueueInlinePolicy",
                "Properties": {
                    "Queue": {"Ref": "Work"},
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"AWS": "arn:aws:iam::444455556666:root"},
                                "Action": "sqs:SendMessage",
                                "Resource": {"Fn::GetAtt": ["Work", "Arn"]},
                            }
                        ],
                    },
                },
            },
        },
    }
    template = tmp_path / "work.json"
    template.write_text(json.dumps(document))
    body = f"file://{template}"
    # When it is created and waited for
    aws(gateway, "create-stack", "--stack-name", name, "--template-body", body)
    aws(gateway, "wait", "stack-create-complete", "--stack-name", name)
    work = _physical_ids(gateway, name)["Work"]
    attributes = sqs_json.get_queue_attributes(QueueUrl=work, AttributeNames=["All"])["Attributes"]
    assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] in (3, "3")
    assert "444455556666" in attributes["Policy"]
    # And updated with another parameter value
    aws(
        gateway,
        "update-stack",
        "--stack-name",
        name,
        "--use-previous-template",
        "--parameters",
        "ParameterKey=Timeout,ParameterValue=120",
    )
    aws(gateway, "wait", "stack-update-complete", "--stack-name", name)
    # Then the queue changed and the events tell the story, newest first
    attributes = sqs_json.get_queue_attributes(QueueUrl=work, AttributeNames=["VisibilityTimeout"])
    assert attributes["Attributes"]["VisibilityTimeout"] == "120"
    events = aws_json(gateway, "describe-stack-events", "--stack-name", name)["StackEvents"]
    assert (events[0]["LogicalResourceId"], events[0]["ResourceStatus"]) == (
        name,
        "UPDATE_COMPLETE",
    )
    work_events = [e["ResourceStatus"] for e in events if e["LogicalResourceId"] == "Work"]
    assert work_events == [
        "UPDATE_COMPLETE",
        "UPDATE_IN_PROGRESS",
        "CREATE_COMPLETE",
        "CREATE_IN_PROGRESS",
    ]
    # When it is deleted and waited for
    aws(gateway, "delete-stack", "--stack-name", name)
    aws(gateway, "wait", "stack-delete-complete", "--stack-name", name)
    assert not queue_exists(sqs_json, work)


def test_a_template_failing_half_way_rolls_back_and_the_cli_says_why(
    gateway: GatewayProcess, sqs_json: Any, tmp_path: Path
) -> None:
    # Given a YAML template whose second queue SQS refuses (a FIFO name on a standard queue)
    name = stack_name("broken")
    template = tmp_path / "broken.yaml"
    template.write_text(
        f"""
Resources:
  First:
    Type: AWS::SQS::Queue
    Properties: {{QueueName: {name}-first}}
  Second:
    Type: AWS::SQS::Queue
    DependsOn: First
    Properties: {{QueueName: {name}-second, DelaySeconds: 901}}
"""
    )
    # When `deploy` runs it
    failed = aws(
        gateway, "deploy", "--template-file", str(template), "--stack-name", name, check=False
    )
    # Then the CLI fails, the stack rolled back and the first queue is gone
    assert failed.returncode != 0
    assert "Failed to create/update the stack" in failed.stderr
    stack = aws_json(gateway, "describe-stacks", "--stack-name", name)["Stacks"][0]
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    assert not queue_exists(sqs_json, f"{gateway.endpoint}/000000000000/{name}-first")
    events = aws_json(gateway, "describe-stack-events", "--stack-name", name)["StackEvents"]
    reasons = {
        e["LogicalResourceId"]: e.get("ResourceStatusReason", "")
        for e in events
        if e["ResourceStatus"] == "CREATE_FAILED"
    }
    assert list(reasons) == ["Second"]
    assert "DelaySeconds" in reasons["Second"]
    aws(gateway, "delete-stack", "--stack-name", name)
