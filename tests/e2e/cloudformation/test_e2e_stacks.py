"""CloudFormation stacks of SQS queues through boto3: create, describe, update in place and by
replacement, change sets, rollback, delete, and what another gateway sees.

The CloudFormation API has one wire protocol (awsQuery); the queues it makes are checked
through SQS's JSON protocol.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.cloudformation import (
    APP_TEMPLATE,
    cloudformation_client,
    outputs_of,
    queue_exists,
    stack_name,
    stack_of,
)
from tests.support.harness import GatewayProcess, json_client


@pytest.fixture(scope="module")
def cfn(gateway: GatewayProcess) -> Any:
    return cloudformation_client(gateway.endpoint)


@pytest.fixture(scope="module")
def sqs_json(gateway: GatewayProcess) -> Any:
    return json_client(gateway.endpoint)


def _attributes(sqs: Any, url: str) -> dict[str, str]:
    result: dict[str, str] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"
    ]
    return result


def _resources(cfn: Any, name: str) -> dict[str, dict[str, Any]]:
    listed = cfn.describe_stack_resources(StackName=name)["StackResources"]
    return {r["LogicalResourceId"]: r for r in listed}


def test_validate_template_lists_parameters_and_refuses_other_resource_types(cfn: Any) -> None:
    # When the realistic template is validated
    validated = cfn.validate_template(TemplateBody=APP_TEMPLATE)
    # Then its parameters and description come back
    assert {p["ParameterKey"] for p in validated["Parameters"]} == {
        "Environment",
        "VisibilityTimeout",
        "PartnerAccount",
    }
    assert validated["Description"] == "orders and their dead letters"
    # And a template with a type KQS does not serve is refused, naming it
    bucket = '{"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}'
    with pytest.raises(cfn.exceptions.ClientError) as refused:
        cfn.validate_template(TemplateBody=bucket)
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert "Unrecognized resource types: [AWS::S3::Bucket]" in str(refused.value)


def test_a_stack_creates_its_queues_updates_them_and_deletes_them(cfn: Any, sqs_json: Any) -> None:
    # Given the realistic template deployed with a parameter
    name = stack_name("app")
    stack_id = cfn.create_stack(
        StackName=name,
        TemplateBody=APP_TEMPLATE,
        Parameters=[{"ParameterKey": "VisibilityTimeout", "ParameterValue": "45"}],
        Tags=[{"Key": "owner", "Value": "ops"}],
    )["StackId"]
    cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig={"Delay": 1})
    # Then the stack is complete with its outputs
    stack = stack_of(cfn, name)
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert stack["StackId"] == stack_id
    outputs = outputs_of(cfn, name)
    orders_url = outputs["OrdersUrl"]
    assert orders_url.endswith(f"/000000000000/{name}-orders")
    assert outputs["Names"] == f"{name}-orders,a"
    resources = _resources(cfn, name)
    assert {r["ResourceStatus"] for r in resources.values()} == {"CREATE_COMPLETE"}
    # And the queues carry what the template says, as SQS reports it
    orders = _attributes(sqs_json, orders_url)
    assert orders["VisibilityTimeout"] == "45"
    assert orders["ReceiveMessageWaitTimeSeconds"] == "5"
    redrive = json.loads(orders["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == outputs["DeadLettersArn"]
    assert int(redrive["maxReceiveCount"]) == 4
    policy = json.loads(orders["Policy"])
    assert policy["Statement"][0]["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    dead_letters_url = resources["DeadLetters"]["PhysicalResourceId"]
    dead_letters_name = dead_letters_url.rsplit("/", 1)[1]
    assert dead_letters_name.startswith(f"{name}-DeadLetters-")  # AWS's generated name
    assert _attributes(sqs_json, dead_letters_url)["MessageRetentionPeriod"] == "86400"
    tags = sqs_json.list_queue_tags(QueueUrl=dead_letters_url)["Tags"]
    assert tags == {"team": "orders-dev", "owner": "ops"}
    ledger_url = resources["Ledger"]["PhysicalResourceId"]
    assert outputs["LedgerName"].endswith(".fifo")
    assert _attributes(sqs_json, ledger_url)["ContentBasedDeduplication"] == "true"

    # When the stack is updated: a new parameter value (in place) and prod (in place too)
    cfn.update_stack(
        StackName=name,
        UsePreviousTemplate=True,
        Parameters=[
            {"ParameterKey": "VisibilityTimeout", "ParameterValue": "60"},
            {"ParameterKey": "Environment", "ParameterValue": "prod"},
            {"ParameterKey": "PartnerAccount", "UsePreviousValue": True},
        ],
    )
    cfn.get_waiter("stack_update_complete").wait(StackName=name, WaiterConfig={"Delay": 1})
    # Then the same queues changed in place
    assert outputs_of(cfn, name)["OrdersUrl"] == orders_url
    orders = _attributes(sqs_json, orders_url)
    assert (orders["VisibilityTimeout"], orders["ReceiveMessageWaitTimeSeconds"]) == ("60", "20")
    assert _attributes(sqs_json, dead_letters_url)["MessageRetentionPeriod"] == "1209600"

    # And an update with nothing new is refused as AWS refuses it
    with pytest.raises(cfn.exceptions.ClientError, match="No updates are to be performed"):
        cfn.update_stack(
            StackName=name,
            UsePreviousTemplate=True,
            Parameters=[
                {"ParameterKey": k, "UsePreviousValue": True}
                for k in ("VisibilityTimeout", "Environment", "PartnerAccount")
            ],
        )

    # When the stack is deleted
    cfn.delete_stack(StackName=name)
    cfn.get_waiter("stack_delete_complete").wait(StackName=name, WaiterConfig={"Delay": 1})
    # Then its queues are gone but the retained one, and the stack is DELETE_COMPLETE by id
    assert not queue_exists(sqs_json, orders_url)
    assert not queue_exists(sqs_json, dead_letters_url)
    assert queue_exists(sqs_json, ledger_url)
    assert stack_of(cfn, stack_id)["StackStatus"] == "DELETE_COMPLETE"
    with pytest.raises(cfn.exceptions.ClientError, match="does not exist"):
        cfn.describe_stacks(StackName=name)
    sqs_json.delete_queue(QueueUrl=ledger_url)


def test_a_new_queue_name_replaces_the_queue(cfn: Any, sqs_json: Any) -> None:
    # Given a stack with one named queue
    name = stack_name("replace")
    template: dict[str, Any] = {
        "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{name}-a"}}}
    }
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))
    old_url = _resources(cfn, name)["Q"]["PhysicalResourceId"]
    # When its QueueName changes, through a change set
    template["Resources"]["Q"]["Properties"]["QueueName"] = f"{name}-b"
    created = cfn.create_change_set(
        StackName=name, ChangeSetName="rename", TemplateBody=json.dumps(template)
    )
    change_set = cfn.describe_change_set(ChangeSetName=created["Id"])
    change = change_set["Changes"][0]["ResourceChange"]
    assert (change["Action"], change["Replacement"]) == ("Modify", "True")
    cfn.execute_change_set(ChangeSetName="rename", StackName=name)
    cfn.get_waiter("stack_update_complete").wait(StackName=name, WaiterConfig={"Delay": 1})
    # Then a new queue replaced the old one
    new_url = _resources(cfn, name)["Q"]["PhysicalResourceId"]
    assert new_url.endswith(f"/{name}-b")
    assert queue_exists(sqs_json, new_url)
    assert not queue_exists(sqs_json, old_url)
    statuses = [
        e["ResourceStatus"] for e in cfn.describe_stack_events(StackName=name)["StackEvents"]
    ]
    assert statuses[0] == "UPDATE_COMPLETE"
    assert "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS" in statuses
    cfn.delete_stack(StackName=name)
    assert not queue_exists(sqs_json, new_url)


def test_a_failing_resource_rolls_the_creation_back_with_an_event_saying_why(
    cfn: Any, sqs_json: Any
) -> None:
    # Given a template whose second queue SQS refuses (a visibility timeout over 12 hours)
    name = stack_name("broken")
    template = {
        "Resources": {
            "Good": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{name}-good"}},
            "Bad": {
                "Type": "AWS::SQS::Queue",
                "DependsOn": "Good",
                "Properties": {"QueueName": f"{name}-bad", "VisibilityTimeout": 99999},
            },
        }
    }
    # When it is created
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))
    with pytest.raises(Exception, match="ROLLBACK_COMPLETE"):
        cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig={"Delay": 1})
    # Then the stack rolled back, the queue it had made is gone, and an event says why
    assert stack_of(cfn, name)["StackStatus"] == "ROLLBACK_COMPLETE"
    assert not queue_exists(sqs_json, sqs_json.meta.endpoint_url + f"/000000000000/{name}-good")
    events = cfn.describe_stack_events(StackName=name)["StackEvents"]
    failed = [e for e in events if e["ResourceStatus"] == "CREATE_FAILED"]
    assert [e["LogicalResourceId"] for e in failed] == ["Bad"]
    assert "VisibilityTimeout" in failed[0]["ResourceStatusReason"]
    # And the rolled-back stack can only be deleted
    with pytest.raises(cfn.exceptions.ClientError, match="ROLLBACK_COMPLETE state"):
        cfn.update_stack(StackName=name, TemplateBody=json.dumps(template))
    cfn.delete_stack(StackName=name)
    assert stack_of(cfn, stack_of_id(cfn, name))["StackStatus"] == "DELETE_COMPLETE"


def stack_of_id(cfn: Any, name: str) -> str:
    for summary in cfn.list_stacks()["StackSummaries"]:
        if summary["StackName"] == name:
            stack_id: str = summary["StackId"]
            return stack_id
    raise AssertionError(f"{name} is not listed")


def test_a_change_set_creates_a_stack_and_an_unchanged_one_fails_as_aws_says(
    cfn: Any, sqs_json: Any
) -> None:
    # Given a CREATE change set
    name = stack_name("cs")
    template = json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}})
    cfn.create_change_set(
        StackName=name, ChangeSetName="first", ChangeSetType="CREATE", TemplateBody=template
    )
    cfn.get_waiter("change_set_create_complete").wait(
        StackName=name, ChangeSetName="first", WaiterConfig={"Delay": 1}
    )
    # Then the stack waits in review with the change listed
    assert stack_of(cfn, name)["StackStatus"] == "REVIEW_IN_PROGRESS"
    described = cfn.describe_change_set(StackName=name, ChangeSetName="first")
    assert [c["ResourceChange"]["Action"] for c in described["Changes"]] == ["Add"]
    assert [s["ChangeSetName"] for s in cfn.list_change_sets(StackName=name)["Summaries"]] == [
        "first"
    ]
    # When it is executed
    cfn.execute_change_set(StackName=name, ChangeSetName="first")
    cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig={"Delay": 1})
    url = _resources(cfn, name)["Q"]["PhysicalResourceId"]
    assert queue_exists(sqs_json, url)
    # And an UPDATE change set of the same template fails with the reason `deploy` reads
    cfn.create_change_set(StackName=name, ChangeSetName="same", TemplateBody=template)
    same = cfn.describe_change_set(StackName=name, ChangeSetName="same")
    assert same["Status"] == "FAILED"
    assert "didn't contain changes" in same["StatusReason"]
    cfn.delete_change_set(StackName=name, ChangeSetName="same")
    assert cfn.get_template(StackName=name)["TemplateBody"] == json.loads(template)
    summary = cfn.get_template_summary(StackName=name)
    assert summary["ResourceTypes"] == ["AWS::SQS::Queue"]
    cfn.delete_stack(StackName=name)
    assert not queue_exists(sqs_json, url)


# The second gateway's accounts: the session gateway's own root key, and a user who may only
# look queues up.
IAM_CONFIG = """
default_account = "000000000000"

[[accounts]]
id = "000000000000"
access_key_id = "test"
secret_access_key = "test"

[[accounts.users]]
name = "looker"
access_key_id = "looker"
secret_access_key = "looker-secret"
policies = ['''{"Version": "2012-10-17", "Statement": {"Effect": "Allow",
  "Action": "sqs:GetQueueUrl", "Resource": "*"}}''']
"""
POLICY_DOCUMENT = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}
    ],
}


def test_another_gateway_sees_the_stacks_and_makes_queues_with_the_callers_permissions(
    gateway: GatewayProcess, cfn: Any, tmp_path: Path
) -> None:
    # Given a stack exporting a queue URL, made through the session's gateway
    name = stack_name("shared")
    exporter = {
        "Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"Url": {"Value": {"Ref": "Q"}, "Export": {"Name": f"{name}-url"}}},
    }
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(exporter))
    # When a second gateway starts on the same Kafka (it reads the stacks from there), with
    # accounts and users configured
    config = tmp_path / "iam.toml"
    config.write_text(IAM_CONFIG)
    other = GatewayProcess(
        tmp_path / "other", gateway.bootstrap, env={"KQS_IAM_CONFIG": str(config)}
    )
    other.start()
    try:
        other_cfn = cloudformation_client(other.endpoint)
        # Then it sees the stack, and a stack made there imports the export
        assert stack_of(other_cfn, name)["StackStatus"] == "CREATE_COMPLETE"
        importer = {
            "Resources": {
                "P": {
                    "Type": "AWS::SQS::QueuePolicy",
                    "Properties": {
                        "Queues": [{"Fn::ImportValue": f"{name}-url"}],
                        "PolicyDocument": POLICY_DOCUMENT,
                    },
                }
            }
        }
        other_cfn.create_stack(StackName=f"{name}-user", TemplateBody=json.dumps(importer))
        assert stack_of(other_cfn, f"{name}-user")["StackStatus"] == "CREATE_COMPLETE"
        # And a user without sqs:CreateQueue cannot make a queue through a stack
        looker = cloudformation_client(
            other.endpoint,
            credentials={"aws_access_key_id": "looker", "aws_secret_access_key": "looker-secret"},
        )
        denied = stack_name("denied")
        looker.create_stack(
            StackName=denied, TemplateBody=json.dumps(exporter).replace(name, denied)
        )
        assert stack_of(looker, denied)["StackStatus"] == "ROLLBACK_COMPLETE"
        events = looker.describe_stack_events(StackName=denied)["StackEvents"]
        reason = next(e for e in events if e["ResourceStatus"] == "CREATE_FAILED")[
            "ResourceStatusReason"
        ]
        assert "AccessDenied" in reason
        # And an unsigned request is refused
        unsigned = urllib.request.Request(
            other.endpoint, data=b"Action=ListStacks&Version=2010-05-15", method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(unsigned, timeout=30)
        assert b"MissingAuthenticationToken" in refused.value.read()
    finally:
        other.stop()
    # And the exporting stack cannot be deleted while its export is imported
    cfn.delete_stack(StackName=name)
    deleted = stack_of(cfn, name)
    assert deleted["StackStatus"] == "DELETE_FAILED"
    assert "in use by" in deleted["StackStatusReason"]
    cfn.delete_stack(StackName=f"{name}-user")
    cfn.delete_stack(StackName=name)
    assert stack_of(cfn, stack_of_id(cfn, name))["StackStatus"] == "DELETE_COMPLETE"
