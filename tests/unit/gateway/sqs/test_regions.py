"""Regions without I/O: catalog records, names, and the registry's per-region lookups."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from gateway.common.errors import InvalidParameterValue, QueueDoesNotExist
from gateway.sqs.queues import QueueRegistry, redrive_allows
from topology.catalog import QueueRecord
from topology.names import catalog_key, parse_queue_topic, queue_topic

ACCOUNT = "000000000000"
INCARNATION = "ab" * 16
# A catalog value as gateways wrote it before regions existed.
OLD_RECORD = json.dumps(
    {
        "account_id": ACCOUNT,
        "name": "orders",
        "incarnation": INCARNATION,
        "partitions": 1,
        "attributes": {"VisibilityTimeout": "30"},
        "tags": {},
        "created_s": 1,
        "modified_s": 1,
        "deleted_ms": None,
    }
).encode()


class FakeAdmin:
    def __init__(self) -> None:
        self.topics: list[str] = []

    def queue_durable(self, config: dict[str, str]) -> dict[str, str]:
        return config

    async def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        self.topics.append(name)


class FakeCatalog:
    def __init__(self) -> None:
        self.keys: list[str] = []

    async def put(self, record: QueueRecord) -> int:
        self.keys.append(record.key)
        return len(self.keys) - 1  # the offset it landed at


def a_registry(
    default_region: str = "us-east-1",
) -> tuple[QueueRegistry, FakeCatalog, FakeAdmin]:
    catalog, admin = FakeCatalog(), FakeAdmin()
    registry = QueueRegistry(
        cast(Any, catalog),
        cast(Any, admin),
        1,
        lambda record: None,
        lambda record: None,
        default_region,
    )
    return registry, catalog, admin


def a_record(region: str, name: str = "orders", **changes: Any) -> QueueRecord:
    return QueueRecord(
        ACCOUNT,
        name,
        INCARNATION,
        1,
        region=region,
        region_in_names=region != "us-east-1",
        **changes,
    )


# -- records and names -----------------------------------------------------------------------


def test_a_catalog_record_without_a_region_is_read_into_the_default_region() -> None:
    # When a record written before regions existed is read by a gateway of eu-central-1
    record = QueueRecord.decode(OLD_RECORD, default_region="eu-central-1")
    # Then it is that region's queue, and its catalog key and topic are the ones it had
    assert record.region == "eu-central-1"
    assert record.arn == f"arn:aws:sqs:eu-central-1:{ACCOUNT}:orders"
    assert record.key == f"{ACCOUNT}/orders"
    assert record.topic == f"kqs.{ACCOUNT}.orders.{INCARNATION}"
    # And once written again, it keeps that region whatever the default becomes
    again = QueueRecord.decode(record.encode(), default_region="us-east-1")
    assert again == record


def test_a_queue_of_another_region_has_the_region_in_its_catalog_key_and_topic() -> None:
    record = a_record("eu-west-1")
    assert record.key == f"eu-west-1/{ACCOUNT}/orders"
    assert record.topic == f"kqs.eu-west-1.{ACCOUNT}.orders.{INCARNATION}"
    assert QueueRecord.decode(record.encode(), default_region="us-east-1") == record


def test_topic_names_of_both_forms_parse_back_unambiguously() -> None:
    legacy = queue_topic("", ACCOUNT, "my-queue_1", INCARNATION)
    regional = queue_topic("us-gov-west-1", ACCOUNT, "my-queue_1", INCARNATION)
    assert parse_queue_topic(legacy) == ("", ACCOUNT, "my-queue_1", INCARNATION)
    assert parse_queue_topic(regional) == ("us-gov-west-1", ACCOUNT, "my-queue_1", INCARNATION)
    assert parse_queue_topic("__kqs_events") is None
    assert catalog_key("", ACCOUNT, "q") != catalog_key("us-east-1", ACCOUNT, "q")


# -- the registry ----------------------------------------------------------------------------


def test_an_old_record_is_found_in_the_default_region_only() -> None:
    # Given a registry of us-east-1 loaded with a record of before regions
    registry, _, _ = a_registry()
    registry.load([QueueRecord.decode(OLD_RECORD, default_region="us-east-1")])
    # Then the queue is us-east-1's, by name, URL and ARN, and nowhere else
    assert registry.active("us-east-1", ACCOUNT, "orders") is not None
    assert registry.resolve(f"http://h/{ACCOUNT}/orders", ACCOUNT, "us-east-1").name == "orders"
    assert registry.by_arn(f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders") is not None
    assert registry.active("eu-west-1", ACCOUNT, "orders") is None
    assert registry.by_arn(f"arn:aws:sqs:eu-west-1:{ACCOUNT}:orders") is None
    with pytest.raises(QueueDoesNotExist):
        registry.resolve(f"http://h/{ACCOUNT}/orders", ACCOUNT, "eu-west-1")
    assert [r.name for r in registry.listed("us-east-1", ACCOUNT)] == ["orders"]
    assert registry.listed("eu-west-1", ACCOUNT) == []


async def test_the_same_name_in_two_regions_is_two_queues_with_their_own_names() -> None:
    # Given a registry whose default region is us-east-1
    registry, catalog, admin = a_registry()
    # When "orders" is created in us-east-1 and in eu-west-1
    home, created_home = await registry.create("us-east-1", ACCOUNT, "orders", {}, {}, 0)
    away, created_away = await registry.create("eu-west-1", ACCOUNT, "orders", {}, {}, 0)
    # Then both are new, distinct queues; the default region's names have no region
    assert created_home and created_away
    assert home.incarnation != away.incarnation
    assert catalog.keys == [f"{ACCOUNT}/orders", f"eu-west-1/{ACCOUNT}/orders"]
    assert admin.topics == [
        f"kqs.{ACCOUNT}.orders.{home.incarnation}",
        f"kqs.eu-west-1.{ACCOUNT}.orders.{away.incarnation}",
    ]
    assert registry.active("us-east-1", ACCOUNT, "orders") == home
    assert registry.active("eu-west-1", ACCOUNT, "orders") == away
    assert registry.by_topic(away.topic) == away


async def test_a_default_region_queue_takes_the_regional_form_when_the_old_key_is_held() -> None:
    # Given a us-east-1 queue of region-less names, then the default region became eu-west-1
    registry, catalog, _ = a_registry(default_region="eu-west-1")
    registry.load([a_record("us-east-1")])
    # When "orders" is created in eu-west-1
    record, _ = await registry.create("eu-west-1", ACCOUNT, "orders", {}, {}, 0)
    # Then it does not take over the us-east-1 queue's catalog key
    assert catalog.keys == [f"eu-west-1/{ACCOUNT}/orders"]
    assert registry.active("us-east-1", ACCOUNT, "orders") is not None
    assert record.region_in_names


def test_of_two_records_of_one_queue_the_live_one_is_loaded() -> None:
    # Given a deleted region-less record and its regional successor (either order)
    deleted = a_record("us-east-1", deleted_ms=5)
    successor = QueueRecord(
        ACCOUNT, "orders", "cd" * 16, 1, region="us-east-1", region_in_names=True
    )
    for records in ([deleted, successor], [successor, deleted]):
        registry, _, _ = a_registry(default_region="eu-west-1")
        registry.load(records)
        assert registry.active("us-east-1", ACCOUNT, "orders") == successor


def test_a_redrive_policy_naming_a_queue_of_another_region_is_refused() -> None:
    # Given "dlq" in eu-west-1 only
    registry, _, _ = a_registry()
    registry.load([a_record("eu-west-1", "dlq")])
    policy = {
        "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": f"arn:aws:sqs:eu-west-1:{ACCOUNT}:dlq", "maxReceiveCount": 2}
        )
    }
    # Then a us-east-1 queue may not use it, and a eu-west-1 queue may
    with pytest.raises(InvalidParameterValue, match="must be in same region as the source"):
        registry.validate_redrive(policy, f"arn:aws:sqs:us-east-1:{ACCOUNT}:src")
    registry.validate_redrive(policy, f"arn:aws:sqs:eu-west-1:{ACCOUNT}:src")


def test_a_redrive_allow_policy_by_queue_compares_regions_too() -> None:
    dlq = a_record(
        "eu-west-1",
        "dlq",
        attributes={
            "RedriveAllowPolicy": json.dumps(
                {
                    "redrivePermission": "byQueue",
                    "sourceQueueArns": [f"arn:aws:sqs:eu-west-1:{ACCOUNT}:src"],
                }
            )
        },
    )
    assert redrive_allows(dlq, f"arn:aws:sqs:eu-west-1:{ACCOUNT}:src")
    assert not redrive_allows(dlq, f"arn:aws:sqs:us-east-1:{ACCOUNT}:src")
