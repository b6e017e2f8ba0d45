"""The pure queue-attribute rules: names, value formats, and the redrive policies' shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.common.errors import InvalidAttributeName, InvalidAttributeValue, InvalidParameterValue
from gateway.sqs.queue_attributes import (
    ALL_NAMES,
    normalize_redrive_policy,
    requested_names,
    validate_redrive_allow_policy,
    validate_settable,
)

DLQ_ARN = "arn:aws:sqs:us-east-1:000000000000:dlq"


def _arns(count: int) -> list[str]:
    return [f"arn:aws:sqs:us-east-1:000000000000:q{i}" for i in range(count)]


# -- requested_names -------------------------------------------------------------------------


def test_all_expands_to_every_standard_queue_attribute() -> None:
    assert requested_names(["All"]) == list(ALL_NAMES)


def test_requested_names_keep_their_order_without_duplicates() -> None:
    assert requested_names(["QueueArn", "DelaySeconds", "QueueArn"]) == [
        "QueueArn",
        "DelaySeconds",
    ]


def test_fifo_attribute_names_are_known_to_fifo_queues_only() -> None:
    assert requested_names(["FifoQueue"], fifo=True) == ["FifoQueue"]
    with pytest.raises(InvalidAttributeName, match=r"^Unknown Attribute FifoQueue\.$"):
        requested_names(["FifoQueue"])


def test_unknown_attribute_name_is_refused() -> None:
    with pytest.raises(InvalidAttributeName, match=r"^Unknown Attribute Colour\.$"):
        requested_names(["DelaySeconds", "Colour"])


# -- validate_settable -----------------------------------------------------------------------


def test_booleans_are_stored_lower_case() -> None:
    assert validate_settable({"SqsManagedSseEnabled": "TRUE"}) == {"SqsManagedSseEnabled": "true"}


@pytest.mark.parametrize("name", ["QueueArn", "ApproximateNumberOfMessages", "Colour"])
def test_read_only_and_unknown_attributes_cannot_be_set(name: str) -> None:
    with pytest.raises(InvalidAttributeName):
        validate_settable({name: "1"})


@pytest.mark.parametrize("value", ["", " 30", "30.0", "43201"])
def test_visibility_timeout_must_be_an_integer_in_range(value: str) -> None:
    with pytest.raises(InvalidAttributeValue):
        validate_settable({"VisibilityTimeout": value})


@pytest.mark.parametrize("name", ["Policy", "RedrivePolicy", "RedriveAllowPolicy"])
def test_empty_policy_is_valid_and_kept_empty(name: str) -> None:
    assert validate_settable({name: ""}) == {name: ""}


def test_redrive_policy_is_normalised_when_set() -> None:
    raw = json.dumps({"maxReceiveCount": "7", "deadLetterTargetArn": DLQ_ARN})
    assert validate_settable({"RedrivePolicy": raw}) == {
        "RedrivePolicy": f'{{"deadLetterTargetArn":"{DLQ_ARN}","maxReceiveCount":7}}'
    }


# -- normalize_redrive_policy ----------------------------------------------------------------


@pytest.mark.parametrize("count", [3, "3", " 3"])
def test_max_receive_count_becomes_a_number(count: Any) -> None:
    raw = json.dumps({"deadLetterTargetArn": DLQ_ARN, "maxReceiveCount": count})
    assert json.loads(normalize_redrive_policy(raw)) == {
        "deadLetterTargetArn": DLQ_ARN,
        "maxReceiveCount": 3,
    }


@pytest.mark.parametrize("count", ["many", True, 2.5, None])
def test_a_max_receive_count_that_is_no_integer_is_left_for_the_redrive_check(
    count: Any,
) -> None:
    raw = json.dumps({"deadLetterTargetArn": DLQ_ARN, "maxReceiveCount": count})
    assert normalize_redrive_policy(raw) == raw


# -- validate_redrive_allow_policy -----------------------------------------------------------


@pytest.mark.parametrize(
    "policy",
    [
        {"redrivePermission": "allowAll"},
        {"redrivePermission": "denyAll"},
        {"redrivePermission": "byQueue", "sourceQueueArns": _arns(1)},
        {"redrivePermission": "byQueue", "sourceQueueArns": _arns(10)},
    ],
)
def test_valid_redrive_allow_policies_pass(policy: dict[str, Any]) -> None:
    validate_redrive_allow_policy(json.dumps(policy))


def test_empty_redrive_allow_policy_passes() -> None:
    validate_redrive_allow_policy("")


@pytest.mark.parametrize(
    "policy",
    [
        {},
        {"redrivePermission": "sometimes"},
        {"redrivePermission": "AllowAll"},
        {"redrivePermission": "byQueue"},
        {"redrivePermission": "byQueue", "sourceQueueArns": []},
        {"redrivePermission": "byQueue", "sourceQueueArns": _arns(11)},
        {"redrivePermission": "byQueue", "sourceQueueArns": DLQ_ARN},
        {"redrivePermission": "byQueue", "sourceQueueArns": [""]},
        {"redrivePermission": "byQueue", "sourceQueueArns": [7]},
        {"redrivePermission": "denyAll", "sourceQueueArns": _arns(1)},
    ],
)
def test_invalid_redrive_allow_policies_are_refused(policy: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameterValue, match="parameter RedriveAllowPolicy is invalid"):
        validate_redrive_allow_policy(json.dumps(policy))


def _statement(sid: str) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage"}


@pytest.mark.parametrize(
    "policy",
    [
        "not json",
        json.dumps({"Statement": [_statement("same"), _statement("same")]}),
        json.dumps({"Statement": [_statement(f"s{i}") for i in range(21)]}),
        json.dumps({"Statement": [{**_statement("big"), "Resource": "x" * 8200}]}),
        json.dumps({"Statement": {"Effect": "Allow", "Principal": "*"}}),
    ],
)
def test_a_queue_policy_must_be_valid_access_policy_language_within_the_limits(
    policy: str,
) -> None:
    with pytest.raises(InvalidAttributeValue, match="Invalid value for the parameter Policy."):
        validate_settable({"Policy": policy})


def test_a_queue_policy_of_20_statements_is_kept_as_written() -> None:
    policy = json.dumps({"Statement": [_statement(f"s{i}") for i in range(20)]})
    assert validate_settable({"Policy": policy}) == {"Policy": policy}
