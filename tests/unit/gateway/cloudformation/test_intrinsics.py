"""The intrinsic functions, conditions and parameters, evaluated without any resource."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.cloudformation import parameters
from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.intrinsics import Scope
from gateway.cloudformation.parameters import GivenParameter
from gateway.cloudformation.template import parse

TEMPLATE = parse(
    """
Parameters:
  Env: {Type: String, AllowedValues: [dev, prod], Default: dev}
  Sizes: {Type: CommaDelimitedList, Default: "a,b,c"}
  Count: {Type: Number, MinValue: 1, MaxValue: 5, Default: 2}
Mappings:
  Retention: {dev: {Seconds: 60}, prod: {Seconds: 3600}}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
  NotProd: !Not [!Condition IsProd]
  Both: !And [!Condition NotProd, !Or [!Equals [1, 1], !Condition IsProd]]
Resources:
  Q: {Type: AWS::SQS::Queue}
"""
)


def _scope(values: dict[str, str] | None = None) -> Scope:
    return Scope(
        TEMPLATE,
        parameters.typed(TEMPLATE, values or {"Env": "dev", "Sizes": "a,b,c", "Count": "2"}),
        {"AWS::Region": "eu-west-1", "AWS::StackName": "s", "AWS::Partition": "aws"},
        lambda lid: f"https://q/{lid}",
        lambda lid, attribute: f"{lid}.{attribute}",
        lambda name: {"shared": "exported"}[name],
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Ref": "Env"}, "dev"),
        ({"Ref": "Q"}, "https://q/Q"),
        ({"Fn::GetAtt": ["Q", "Arn"]}, "Q.Arn"),
        (
            {"Fn::Sub": "${AWS::StackName}-${Env}-${Q.QueueName}-${!Literal}"},
            "s-dev-Q.QueueName-${Literal}",
        ),
        ({"Fn::Sub": ["${A}/${Env}", {"A": {"Ref": "AWS::Region"}}]}, "eu-west-1/dev"),
        ({"Fn::Join": ["-", {"Ref": "Sizes"}]}, "a-b-c"),
        ({"Fn::Select": [1, {"Ref": "Sizes"}]}, "b"),
        ({"Fn::Split": ["/", "x/y"]}, ["x", "y"]),
        ({"Fn::If": ["IsProd", 20, 5]}, 5),
        ({"Fn::FindInMap": ["Retention", {"Ref": "Env"}, "Seconds"]}, 60),
        ({"Fn::ImportValue": "shared"}, "exported"),
        ({"A": 1, "B": {"Ref": "AWS::NoValue"}}, {"A": 1}),
        ([1, {"Ref": "AWS::NoValue"}, 2], [1, 2]),
    ],
)
def test_each_function_gives_what_aws_gives(value: Any, expected: Any) -> None:
    assert _scope().resolve(value) == expected


def test_conditions_combine_and_refer_to_each_other() -> None:
    scope = _scope()
    assert (scope.condition("IsProd"), scope.condition("NotProd"), scope.condition("Both")) == (
        False,
        True,
        True,
    )


def test_parameters_default_check_and_keep_previous_values() -> None:
    given = [GivenParameter("Env", "prod"), GivenParameter("Count", None, use_previous=True)]
    values = parameters.resolve(TEMPLATE, given, {"Count": "4"})
    assert values == {"Env": "prod", "Sizes": "a,b,c", "Count": "4"}
    with pytest.raises(ValidationError, match="must be one of AllowedValues"):
        parameters.resolve(TEMPLATE, [GivenParameter("Env", "test")], {})
    with pytest.raises(ValidationError, match="not greater than 5"):
        parameters.resolve(TEMPLATE, [GivenParameter("Count", "9")], {})
    with pytest.raises(ValidationError, match=r"Parameters: \[Nope\] do not exist"):
        parameters.resolve(TEMPLATE, [GivenParameter("Nope", "x")], {})
