"""Stacks whose operation stopped half-way because the gateway running it did.

An operation runs inside the request that started it, on one gateway; if that gateway
crashes or is killed, its stack stays in an *_IN_PROGRESS status in `__kqs_stacks`. A
single gateway (`KQS_PARTITION_OWNERSHIP=all`) ran every operation it finds in progress at
start, so it settles them all then; with several gateways, an operation is taken as
abandoned once its stack has been quiet for `ABANDONED_AFTER_MS` (each step writes an event,
and a step takes well under a second). A settled stack is in the failed status AWS would
leave it in, from which it can be deleted (what was recorded as made is deleted with it;
a queue being created at the very moment of the crash is not recorded, and stays).
"""

from __future__ import annotations

import logging

from gateway.cloudformation.records import Stack, StackEvent
from gateway.cloudformation.store import StackStore

log = logging.getLogger("kqs.cloudformation")

ABANDONED_AFTER_MS = 5 * 60_000
REASON = (
    "The gateway running this operation stopped before the operation ended; the stack can "
    "be deleted"
)
# In-progress status -> where an abandoned stack is left.
_SETTLED = {
    "CREATE_IN_PROGRESS": "CREATE_FAILED",
    "ROLLBACK_IN_PROGRESS": "ROLLBACK_FAILED",
    "UPDATE_IN_PROGRESS": "UPDATE_ROLLBACK_FAILED",
    "UPDATE_ROLLBACK_IN_PROGRESS": "UPDATE_ROLLBACK_FAILED",
    "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS": "UPDATE_ROLLBACK_COMPLETE",
    "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS": "UPDATE_COMPLETE",
    "DELETE_IN_PROGRESS": "DELETE_FAILED",
}


def last_change_ms(stack: Stack) -> int:
    return stack.events[-1].timestamp_ms if stack.events else stack.created_ms


def abandoned(stack: Stack, now_ms: int) -> bool:
    """Whether the stack's operation has been quiet long enough to be taken as stopped."""
    return stack.status in _SETTLED and now_ms - last_change_ms(stack) > ABANDONED_AFTER_MS


async def settle_abandoned(store: StackStore, now_ms: int, all_in_progress: bool) -> int:
    """Leave every abandoned stack in its failed status; `all_in_progress`: every stack in
    progress is abandoned (a single gateway, just started). Returns how many it settled."""
    settled = 0
    for stack in store.everywhere():
        if stack.status not in _SETTLED:
            continue
        if not all_in_progress and not abandoned(stack, now_ms):
            continue
        settle(stack, now_ms)
        await store.save(stack)
        settled += 1
        log.warning("stack operation abandoned", extra={"stack": stack.stack_id})
    return settled


def settle(stack: Stack, now_ms: int) -> None:
    for state in stack.resources.values():
        if state.status.endswith("_IN_PROGRESS"):
            state.status = state.status.replace("_IN_PROGRESS", "_FAILED")
            state.reason = REASON
    stack.status = _SETTLED[stack.status]
    stack.status_reason = REASON
    stack.add_event(
        StackEvent(
            f"settled-{now_ms}",
            stack.name,
            stack.stack_id,
            "AWS::CloudFormation::Stack",
            stack.status,
            REASON,
            now_ms,
        )
    )
