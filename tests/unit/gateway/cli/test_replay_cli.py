"""`kqs replay`'s times and offsets (gateway/cli/replay.py) and the botocore model additions
(gateway/cli/sqs_model.py) in both SQS protocols' models."""

from __future__ import annotations

import argparse

import botocore.session
import pytest

from gateway.cli.replay import parse_offsets, parse_time
from gateway.cli.sqs_model import OPERATIONS, with_kqs_operations

NOW_S = 1_800_000_000.0


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("15m", 1_800_000_000_000 - 900_000),
        ("2h ago", 1_800_000_000_000 - 7_200_000),
        ("1800000000", 1_800_000_000_000),
        ("1800000000123", 1_800_000_000_123),
        ("2027-01-15T08:00:00Z", 1_800_000_000_000),
        ("2027-01-15T09:00:00+01:00", 1_800_000_000_000),
        ("2027-01-15T08:00:00", 1_800_000_000_000),
    ],
)
def test_times_are_read_as_iso_epoch_or_a_duration_ago(text: str, ms: int) -> None:
    assert parse_time(text, NOW_S) == ms


def test_a_time_that_is_none_of_those_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_time("yesterday", NOW_S)


def test_offsets_are_partition_equals_offset_pairs() -> None:
    assert parse_offsets("0=12, 1=0") == {"0": "12", "1": "0"}
    with pytest.raises(argparse.ArgumentTypeError):
        parse_offsets("0:12")


def test_the_operations_join_the_json_model_and_flatten_in_a_query_one() -> None:
    json_model = (
        botocore.session.Session()
        .get_component("data_loader")
        .load_service_model("sqs", "service-2")
    )
    added = with_kqs_operations(json_model)
    assert set(OPERATIONS) <= set(added["operations"])
    assert "StartMessageReplayTask" not in json_model["operations"]  # a copy was changed
    start = added["shapes"]["StartMessageReplayTaskRequest"]["members"]
    assert "locationName" not in start["StartOffsets"]
    query = {**json_model, "metadata": {**json_model["metadata"], "protocol": "query"}}
    as_query = with_kqs_operations(query)
    assert as_query["shapes"]["KqsStartOffsets"]["flattened"] is True
    assert as_query["operations"]["PeekMessages"]["output"]["resultWrapper"] == (
        "PeekMessagesResult"
    )
