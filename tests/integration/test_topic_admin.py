"""`TopicAdmin` against a real broker: concurrent creations share CreateTopics requests."""

from __future__ import annotations

import asyncio
import time
import uuid

from confluent_kafka.admin import AdminClient

from topology.admin import TopicAdmin


def _topics(bootstrap: str, expected: set[str]) -> set[str]:
    """The broker's topics once `expected` are among them, or after 10 s: a created topic
    reaches the broker's metadata a moment after the controller acknowledged it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 10
    while True:
        topics = set(admin.list_topics(timeout=10).topics)
        if expected <= topics or time.monotonic() > deadline:
            return topics
        time.sleep(0.1)


def test_concurrent_creations_all_land_and_an_existing_topic_is_accepted(
    kafka_bootstrap: str,
) -> None:
    prefix = f"admin-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}-{i}" for i in range(60)]

    async def scenario() -> None:
        admin = TopicAdmin(kafka_bootstrap)
        await admin.create_topic(names[0], 1, {})  # a lone call, sent at once
        # Given 60 concurrent calls, one of them for a topic that exists and one asked twice
        await asyncio.gather(
            *(admin.create_topic(name, 1, {"retention.ms": "60000"}) for name in names),
            admin.create_topic(names[5], 1, {}),
        )

    asyncio.run(scenario())
    # Then every topic exists
    assert set(names) <= _topics(kafka_bootstrap, set(names))


def test_a_refused_topic_fails_only_its_own_call(kafka_bootstrap: str) -> None:
    good = f"admin-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[BaseException | None, BaseException | None]:
        admin = TopicAdmin(kafka_bootstrap)
        ok, refused = await asyncio.gather(
            admin.create_topic(good, 1, {}),
            admin.create_topic(f"{good}-bad", 1, {"retention.ms": "not-a-number"}),
            return_exceptions=True,
        )
        return ok, refused

    ok, refused = asyncio.run(scenario())
    assert ok is None
    assert isinstance(refused, Exception)
    assert "retention.ms" in str(refused) or "INVALID" in str(refused).upper()
    assert good in _topics(kafka_bootstrap, {good})
