"""The batch combinator: up to ten entries, each decoded and handled by the single action.

Request-level rules fail the whole request before any entry is handled: no entries, more than
ten, an entry Id that is not 1-80 of `[A-Za-z0-9_-]`, or two entries with the same Id (and,
for SendMessageBatch, a total size over 1 MiB, checked by that action). Everything that goes
wrong with one entry - decoding it or handling it - becomes a `Failed` entry
`{Id, SenderFault, Code, Message}` and the request still answers HTTP 200.

Entries are handled concurrently, so a SendMessageBatch waits for one round of Kafka
acknowledgements rather than ten; results keep the order of the request.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from confluent_kafka import KafkaException

from gateway.actions.action import Result
from gateway.actions.context import Protocol, RequestContext
from gateway.actions.params import Params
from gateway.common import limits
from gateway.common.denials import missing_acl
from gateway.common.errors import (
    BatchEntryIdsNotDistinct,
    EmptyBatchRequest,
    InternalError,
    InvalidBatchEntryId,
    ServiceUnavailable,
    SqsError,
    TooManyEntriesInBatchRequest,
    for_domain_error,
)
from lease_store.errors import LeaseError
from lease_store.value_class import value_class
from topology.producer import ProduceFailed

EntryRequest = TypeVar("EntryRequest")
EntryDecoder = Callable[[Params, str], EntryRequest]
EntryHandler = Callable[[EntryRequest, RequestContext], Awaitable[Result]]
# Handles all decoded entries at once; answers for each, in order, a Result or what failed it.
EntriesHandler = Callable[
    [list[EntryRequest], RequestContext], Awaitable[Sequence[Result | Exception]]
]

log = logging.getLogger("kqs.gateway")

_ENTRY_ID = re.compile(rf"^[A-Za-z0-9_-]{{1,{limits.MAX_BATCH_ENTRY_ID_LENGTH}}}$")


@value_class
class BatchEntry(Generic[EntryRequest]):
    """One entry: its decoded request, or the error that decoding it raised."""

    id: str
    request: EntryRequest | None = None
    error: SqsError | None = None


@value_class
class BatchRequest(Generic[EntryRequest]):
    queue_url: str
    entries: tuple[BatchEntry[EntryRequest], ...]


def decode_batch(
    p: Params, entry_shape: str, decode_entry: EntryDecoder[EntryRequest]
) -> BatchRequest[EntryRequest]:
    """Check the request-level rules, then decode every entry with the single action's decoder.

    `entry_shape` (e.g. `SendMessageBatchRequestEntry`) only names the entries in messages.
    """
    queue_url = p.required_str("QueueUrl")
    raw_entries = p.entries("Entries")
    if not raw_entries:
        raise EmptyBatchRequest(f"There should be at least one {entry_shape} in the request.")
    if len(raw_entries) > limits.MAX_BATCH_ENTRIES:
        raise TooManyEntriesInBatchRequest(
            f"Maximum number of entries per request are {limits.MAX_BATCH_ENTRIES}. "
            f"You have sent {len(raw_entries)}."
        )
    ids = [_entry_id(entry) for entry in raw_entries]
    seen: set[str] = set()
    for entry_id in ids:
        if entry_id in seen:
            raise BatchEntryIdsNotDistinct(f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return BatchRequest(
        queue_url,
        tuple(
            [
                _decode_entry(entry_id, entry, queue_url, decode_entry)
                for entry_id, entry in zip(ids, raw_entries, strict=True)
            ]
        ),
    )


def _entry_id(entry: Params) -> str:
    entry_id = entry.raw("Id")
    if not isinstance(entry_id, str) or not _ENTRY_ID.match(entry_id):
        raise InvalidBatchEntryId(
            "A batch entry id can only contain alphanumeric characters, hyphens and "
            f"underscores. It can be at most {limits.MAX_BATCH_ENTRY_ID_LENGTH} letters long."
        )
    return entry_id


def _decode_entry(
    entry_id: str, entry: Params, queue_url: str, decode_entry: EntryDecoder[EntryRequest]
) -> BatchEntry[EntryRequest]:
    try:
        return BatchEntry(entry_id, request=decode_entry(entry, queue_url))
    except SqsError as error:
        return BatchEntry(entry_id, error=error)
    except LeaseError as error:
        return BatchEntry(entry_id, error=for_domain_error(error))


async def run_batch(
    batch: BatchRequest[EntryRequest],
    ctx: RequestContext,
    handle_entry: EntryHandler[EntryRequest],
    action: str,
) -> Result:
    """Handle every decoded entry concurrently; answer `{Successful, Failed}`. `action` (e.g.
    "SendMessageBatch") names the grant a Kafka ACL refusal of an entry points to."""
    ctx.queue(batch.queue_url)  # a missing queue fails the whole request, not each entry
    refusals: list[str] = []
    outcomes = await asyncio.gather(
        *(_handle_entry(entry, ctx, handle_entry, action, refusals) for entry in batch.entries),
        return_exceptions=True,
    )
    _log_refusals(refusals, ctx)
    return _answer(batch, outcomes, ctx)


async def run_batch_together(
    batch: BatchRequest[EntryRequest],
    ctx: RequestContext,
    handle_entries: EntriesHandler[EntryRequest],
    action: str,
) -> Result:
    """Like `run_batch`, but the decoded entries go to one call, which answers for each in
    order (a Result, or the exception that failed it): one lease-store write and one fsync
    for the whole batch, and no task per entry."""
    ctx.queue(batch.queue_url)
    decoded = [entry.request for entry in batch.entries if entry.request is not None]
    answers = iter(await handle_entries(decoded, ctx) if decoded else [])
    outcomes: list[Result | BaseException] = []
    refusals: list[str] = []
    for entry in batch.entries:
        if entry.request is None:
            assert entry.error is not None
            outcomes.append(entry.error)
            continue
        answer = next(answers)
        outcomes.append(
            _entry_error(answer, action, refusals) if isinstance(answer, Exception) else answer
        )
    _log_refusals(refusals, ctx)
    return _answer(batch, outcomes, ctx)


def _answer(
    batch: BatchRequest[EntryRequest],
    outcomes: Sequence[Result | BaseException],
    ctx: RequestContext,
) -> Result:
    successful: list[Result] = []
    failed: list[Result] = []
    query = ctx.protocol is Protocol.QUERY
    for entry, outcome in zip(batch.entries, outcomes, strict=True):
        if isinstance(outcome, SqsError):
            failed.append(
                {
                    "Id": entry.id,
                    "SenderFault": outcome.sender_fault,
                    "Code": outcome.code,
                    "Message": outcome.message_for(query),
                }
            )
        elif isinstance(outcome, BaseException):
            raise outcome  # a bug, not an entry's fault: every entry has finished by now
        else:
            successful.append({"Id": entry.id, **outcome})
    return {"Successful": successful, "Failed": failed}


def _log_refusals(refusals: list[str], ctx: RequestContext) -> None:
    """One line per request (as the single actions log theirs), not one per entry."""
    if refusals:
        log.error(
            "Kafka refused the gateway: missing ACL",
            extra={"request_id": ctx.request_id, "acl": refusals[0], "entries": len(refusals)},
        )


async def _handle_entry(
    entry: BatchEntry[EntryRequest],
    ctx: RequestContext,
    handle_entry: EntryHandler[EntryRequest],
    action: str,
    refusals: list[str],
) -> Result | BaseException:
    if entry.error is not None:
        return entry.error
    assert entry.request is not None
    try:
        return await handle_entry(entry.request, ctx)
    except Exception as error:  # noqa: BLE001 - sorted by _entry_error
        return _entry_error(error, action, refusals)


def _entry_error(error: Exception, action: str, refusals: list[str]) -> BaseException:
    """What failed one entry, as the SQS error its `Failed` line shows; a bug stays itself
    (and fails the request). A Kafka ACL refusal names the grant missing, as a single action's
    answer does (`gateway/http/pipeline.py`), and is added to `refusals` for the log."""
    if isinstance(error, SqsError):
        return error
    if isinstance(error, LeaseError):
        return for_domain_error(error)
    missing = missing_acl(error, action)
    if missing is not None:  # a deployment's mistake, not an outage: say what to grant
        refusals.append(missing)
        return InternalError(f"Kafka refused the gateway's request: grant it {missing}.")
    if isinstance(error, (ProduceFailed, KafkaException)):
        # Other entries may have been sent: failing only this one lets the client retry it
        # alone instead of duplicating the rest.
        return ServiceUnavailable("The service is unavailable (Kafka did not answer). Retry later.")
    return error
