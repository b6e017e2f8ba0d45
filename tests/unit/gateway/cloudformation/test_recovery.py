"""Stacks a stopped gateway left in progress are settled in the failed status AWS would show."""

from __future__ import annotations

from gateway.cloudformation.records import ResourceState, Stack, StackEvent
from gateway.cloudformation.recovery import ABANDONED_AFTER_MS, settle_abandoned
from gateway.cloudformation.store import MemoryStackWriter, StackStore

NOW_MS = 10_000_000


def _stack(name: str, status: str, last_event_ms: int) -> Stack:
    stack = Stack(
        f"arn:aws:cloudformation:us-east-1:0:stack/{name}/1", name, "us-east-1", "0", status, 0
    )
    stack.resources["Q"] = ResourceState("Q", "AWS::SQS::Queue", "CREATE_IN_PROGRESS")
    stack.add_event(
        StackEvent(
            "e", name, stack.stack_id, "AWS::CloudFormation::Stack", status, "", last_event_ms
        )
    )
    return stack


async def test_a_single_gateway_settles_every_stack_it_finds_in_progress_at_start() -> None:
    # Given a stack left creating and one left deleting
    store = StackStore(MemoryStackWriter())
    await store.save(_stack("a", "CREATE_IN_PROGRESS", NOW_MS))
    await store.save(_stack("b", "DELETE_IN_PROGRESS", NOW_MS))
    # When a single gateway starts
    settled = await settle_abandoned(store, NOW_MS, all_in_progress=True)
    # Then both are failed, resource included, and can be deleted
    a, b = store.current("us-east-1", "0", "a"), store.current("us-east-1", "0", "b")
    assert settled == 2
    assert a is not None and b is not None
    assert (a.status, a.resources["Q"].status, b.status) == (
        "CREATE_FAILED",
        "CREATE_FAILED",
        "DELETE_FAILED",
    )
    assert "stopped before the operation ended" in a.events[-1].reason


async def test_with_several_gateways_only_a_quiet_operation_is_taken_as_abandoned() -> None:
    store = StackStore(MemoryStackWriter())
    await store.save(_stack("busy", "UPDATE_IN_PROGRESS", NOW_MS - 1_000))
    await store.save(_stack("quiet", "UPDATE_IN_PROGRESS", NOW_MS - ABANDONED_AFTER_MS - 1))
    assert await settle_abandoned(store, NOW_MS, all_in_progress=False) == 1
    busy, quiet = store.current("us-east-1", "0", "busy"), store.current("us-east-1", "0", "quiet")
    assert busy is not None and quiet is not None
    assert (busy.status, quiet.status) == ("UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_FAILED")
