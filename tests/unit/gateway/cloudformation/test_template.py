"""Templates as people write them: YAML short forms, sections, references, refused types."""

from __future__ import annotations

import pytest

from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.template import order, parse


def test_yaml_short_forms_read_as_the_long_forms() -> None:
    template = parse(
        """
AWSTemplateFormatVersion: 2010-09-09
Resources:
  A:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-a"
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt B.Arn
        maxReceiveCount: !Select [0, !Split [",", "3,4"]]
  B:
    Type: AWS::SQS::Queue
    Condition: Always
Conditions:
  Always: !Not [!Equals [!Ref "AWS::Region", nowhere]]
"""
    )
    # The unquoted version stays a string (no YAML date)
    assert template.document["AWSTemplateFormatVersion"] == "2010-09-09"
    props = template.resources["A"]["Properties"]
    assert props["QueueName"] == {"Fn::Sub": "${AWS::StackName}-a"}
    assert props["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["B", "Arn"]}
    assert template.conditions["Always"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AWS::Region"}, "nowhere"]}]
    }
    assert order(template, ["A", "B"]) == ["B", "A"]


def test_a_resource_type_kqs_does_not_serve_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match=r"Unrecognized resource types: \[AWS::S3::Bucket\]"):
        parse('{"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}')


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{}", "At least one Resources member must be defined"),
        ('{"Resources": {}, "Bogus": 1}', r"Invalid template property or properties \[Bogus\]"),
        (
            '{"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"X": {"Ref": "Nope"}}}}}',
            r"Unresolved resource dependencies \[Nope\]",
        ),
        (
            '{"Resources": {"A": {"Type": "AWS::SQS::Queue", "DependsOn": "B"},'
            ' "B": {"Type": "AWS::SQS::Queue", "DependsOn": "A"}}}',
            r"Circular dependency between resources: \[A, B\]",
        ),
        ("Resources: [unclosed", "YAML not well-formed"),
        ('{"Resources": ', "JSON not well-formed"),
        ('{"Transform": "AWS::Serverless-2016-10-31", "Resources": {}}', "Transform"),
        (
            '{"Parameters": {"P": {"Type": "AWS::EC2::VPC::Id"}},'
            ' "Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}',
            "Parameter 'P' has type AWS::EC2::VPC::Id",
        ),
    ],
)
def test_a_template_that_cannot_be_used_is_refused_saying_why(body: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse(body)
