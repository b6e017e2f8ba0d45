"""CloudFormation clients of a gateway and the templates the stack tests deploy."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from botocore.config import Config

from tests.support.harness import CREDENTIALS, REGION

_CONFIG = Config(retries={"max_attempts": 1}, read_timeout=120)


def cloudformation_client(endpoint: str, region: str = REGION) -> Any:
    return boto3.session.Session().client(
        "cloudformation", endpoint_url=endpoint, region_name=region, config=_CONFIG, **CREDENTIALS
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
