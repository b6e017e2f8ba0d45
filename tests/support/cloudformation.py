"""CloudFormation clients of a gateway and the templates the stack tests deploy."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from tests.support.clients_support import _build_once, _hash, _run, _tool, cache_dir
from tests.support.harness import CREDENTIALS, REGION

_CONFIG = Config(retries={"max_attempts": 1}, read_timeout=120)


def cloudformation_client(
    endpoint: str, region: str = REGION, credentials: dict[str, str] = CREDENTIALS
) -> Any:
    return boto3.session.Session().client(
        "cloudformation", endpoint_url=endpoint, region_name=region, config=_CONFIG, **credentials
    )


def stack_name(prefix: str = "stack") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def stack_of(cfn: Any, name: str) -> dict[str, Any]:
    stack: dict[str, Any] = cfn.describe_stacks(StackName=name)["Stacks"][0]
    return stack


def outputs_of(cfn: Any, name: str) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack_of(cfn, name).get("Outputs", [])}


def queue_exists(sqs: Any, url: str) -> bool:
    try:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    except sqs.exceptions.QueueDoesNotExist:
        return False
    return True


# An application queue with its dead-letter queue (by !GetAtt Arn), a FIFO queue, a policy
# letting a second account send, parameters and outputs: the "realistic template".
APP_TEMPLATE = """\
AWSTemplateFormatVersion: 2010-09-09
Description: orders and their dead letters
Parameters:
  Environment:
    Type: String
    AllowedValues: [dev, prod]
    Default: dev
  VisibilityTimeout:
    Type: Number
    Default: 30
    MinValue: 0
    MaxValue: 43200
  PartnerAccount:
    Type: String
    Default: "111122223333"
Mappings:
  Retention:
    dev: {Seconds: 86400}
    prod: {Seconds: 1209600}
Conditions:
  IsProd: !Equals [!Ref Environment, prod]
Resources:
  DeadLetters:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: !FindInMap [Retention, !Ref Environment, Seconds]
      Tags:
        - Key: team
          Value: !Sub "orders-${Environment}"
  Orders:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-orders"
      VisibilityTimeout: !Ref VisibilityTimeout
      ReceiveMessageWaitTimeSeconds: !If [IsProd, 20, 5]
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt DeadLetters.Arn
        maxReceiveCount: 4
  Ledger:
    Type: AWS::SQS::Queue
    DeletionPolicy: Retain
    Properties:
      FifoQueue: true
      ContentBasedDeduplication: true
  PartnerMaySend:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref Orders]
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {AWS: !Sub "arn:${AWS::Partition}:iam::${PartnerAccount}:root"}
            Action: sqs:SendMessage
            Resource: !GetAtt Orders.Arn
Outputs:
  OrdersUrl:
    Value: !Ref Orders
    Export: {Name: !Sub "${AWS::StackName}-OrdersUrl"}
  DeadLettersArn:
    Value: !GetAtt DeadLetters.Arn
  LedgerName:
    Value: !GetAtt Ledger.QueueName
  Names:
    Value: !Join [",", [!GetAtt Orders.QueueName, !Select [0, !Split ["|", "a|b"]]]]
"""


# -- the CDK app (tests/e2e/cloudformation/cdk/) ----------------------------------------------

CDK_APP = Path(__file__).resolve().parents[1] / "e2e" / "cloudformation" / "cdk"


def cdk_node_modules() -> Path:
    """`npm ci` of the CDK app's lock file (aws-cdk, aws-cdk-lib, constructs), once per lock
    hash, into the KQS cache; its node_modules. As the Node client libraries are built
    (`clients_support.node_modules`), so CI on a fresh machine installs it itself."""
    manifests = [CDK_APP / "package.json", CDK_APP / "package-lock.json"]
    home = cache_dir() / f"cdk-app-{_hash(manifests)}"

    def build(scratch: Path) -> None:
        for manifest in manifests:
            shutil.copy2(manifest, scratch / manifest.name)
        _run(
            [_tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            scratch,
            home.parent / f"{home.name}-build.log",
        )

    return _build_once(home, build) / "node_modules"


def cdk_env(endpoint: str) -> dict[str, str]:
    """The environment of a `cdk` run against a gateway: its endpoint for every AWS service
    (the SDK's AWS_ENDPOINT_URL), the test credentials, and nothing fetched from the internet."""
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }
