"""The record format of `__kqs_events`: one record per operation outcome, for analytics.

A request's outcome is one record however many messages it concerns: the messages one
send request stored, one ReceiveMessage returned, one delete request removed (`count` says
how many; their ids are in `message_ids` when more than one, see `message_ids_of`, and a
send's SentMessageSize of each in `sizes`).

    key    UTF-8, the queue's catalog key: "<account_id>/<queue_name>" for a queue of the
           default region, "<region>/<account_id>/<queue_name>" for the others
           (`topology/names.py`)
    value  UTF-8 JSON {"v": 1, "type": ..., "ts": <epoch ms>, "account": ..., "queue": ...,
                       "region": ..., "count": <messages the event stands for>,
                       <type-specific fields>}

`docs/ARCHITECTURE.md` ("Events and metrics") is the reference, with each field's meaning.
Version 1 may only grow: readers ignore fields they do not know. The builders here are pure
(no clock, no I/O); the caller passes the time.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from lease_store.records import AttributeValue
from topology.names import catalog_key

VERSION: Final = 1

SENT: Final = "sent"
RECEIVED: Final = "received"
DELETED: Final = "deleted"
EMPTY_RECEIVE: Final = "empty_receive"
MOVED_TO_DLQ: Final = "moved_to_dlq"
EXPIRED: Final = "expired"
PURGED: Final = "purged"
GAUGES: Final = "gauges"
TYPES: Final = (SENT, RECEIVED, DELETED, EMPTY_RECEIVE, MOVED_TO_DLQ, EXPIRED, PURGED, GAUGES)

# Attribute values in a `moved_to_dlq` event are cut to this many characters.
MAX_ATTRIBUTE_VALUE_CHARS: Final = 256

Event = dict[str, Any]


def event_key(account_id: str, queue_name: str, region: str = "") -> bytes:
    """The record key: the queue's catalog key (`region` "" for the region-less form)."""
    return catalog_key(region, account_id, queue_name).encode()


def encode(event: Event) -> bytes:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def decode(raw: bytes) -> Event:
    event: Event = json.loads(raw)
    return event


def _base(
    kind: str, ts_ms: int, account_id: str, queue_name: str, region: str, count: int = 1
) -> Event:
    return {
        "v": VERSION,
        "type": kind,
        "ts": ts_ms,
        "account": account_id,
        "queue": queue_name,
        "region": region,
        "count": count,
    }


def sent(
    ts_ms: int,
    account_id: str,
    queue_name: str,
    messages: Sequence[tuple[str, int]],
    *,
    region: str,
) -> Event:
    """The messages one send request stored, as (message id, SentMessageSize): one event for
    them all (see `message_ids_of`)."""
    base = _base(SENT, ts_ms, account_id, queue_name, region, count=len(messages))
    if len(messages) == 1:
        ((message_id, size),) = messages
        return {**base, "message_id": message_id, "size": size}
    return {
        **base,
        "message_ids": [message_id for message_id, _ in messages],
        "sizes": [size for _, size in messages],
    }


def received(
    ts_ms: int,
    account_id: str,
    queue_name: str,
    messages: Sequence[tuple[str, int]],
    *,
    region: str,
) -> Event:
    """The messages one ReceiveMessage returned, as (message id, receive count): one event
    for them all (see `message_ids_of`)."""
    base = _base(RECEIVED, ts_ms, account_id, queue_name, region, count=len(messages))
    if len(messages) == 1:
        ((message_id, receive_count),) = messages
        return {**base, "message_id": message_id, "receive_count": receive_count}
    return {
        **base,
        "message_ids": [message_id for message_id, _ in messages],
        "receive_counts": [receive_count for _, receive_count in messages],
    }


def deleted(
    ts_ms: int, account_id: str, queue_name: str, message_ids: Sequence[str], *, region: str
) -> Event:
    """The messages one delete request removed: one event for them all."""
    base = _base(DELETED, ts_ms, account_id, queue_name, region, count=len(message_ids))
    if len(message_ids) == 1:
        return {**base, "message_id": message_ids[0]}
    return {**base, "message_ids": list(message_ids)}


def message_ids_of(event: Event) -> list[str]:
    """The ids of the messages an event stands for: a `sent`, `received` or `deleted` event
    of several messages lists them in `message_ids`, any other names one in `message_id`."""
    if "message_ids" in event:
        return list(event["message_ids"])
    return [event["message_id"]] if "message_id" in event else []


def sizes_of(event: Event) -> list[int]:
    """The SentMessageSize of each message of a `sent` event, in `message_ids_of` order."""
    return list(event["sizes"]) if "sizes" in event else [event["size"]]


# The events of every message (sent, received, deleted) are written directly, without
# building a dict for json.dumps (~0.7 µs instead of ~5.5 µs): the same bytes, member for
# member, as `encode` of the builders above (tests/unit/gateway/observability/test_events.py compares them).
_text = partial(json.dumps, ensure_ascii=False)


_PLAIN_ID = re.compile(r"[0-9A-Za-z-]+")


def _id_text(message_id: str) -> str:
    """`message_id` as a JSON string: our ids (UUIDs) need no escaping, so skip json.dumps."""
    return f'"{message_id}"' if _PLAIN_ID.fullmatch(message_id) else _text(message_id)


_PLAIN_IDS = re.compile(f'{_PLAIN_ID.pattern}(?:","{_PLAIN_ID.pattern})*')  # joined by `","`


def _ids_text(message_ids: Sequence[str]) -> str:
    """The members of a JSON array of `message_ids`: when every id is plain, one match over
    them joined instead of one per id. An id holding the separator itself would add a
    separator, hence the count."""
    joined = '","'.join(message_ids)
    if _PLAIN_IDS.fullmatch(joined) and joined.count('","') == len(message_ids) - 1:
        return f'"{joined}"'
    return ",".join([_id_text(message_id) for message_id in message_ids])


def queue_members(account_id: str, queue_name: str, region: str) -> str:
    """The JSON members naming a queue, encoded once per queue for the `encode_*` below."""
    return f',"account":{_text(account_id)},"queue":{_text(queue_name)},"region":{_text(region)}'


def encode_sent(ts_ms: int, queue: str, messages: Sequence[tuple[str, int]]) -> bytes:
    head = f'{{"v":{VERSION},"type":"{SENT}","ts":{ts_ms:d}{queue},"count":{len(messages):d},'
    if len(messages) == 1:
        ((message_id, size),) = messages
        return f'{head}"message_id":{_id_text(message_id)},"size":{size:d}}}'.encode()
    ids = _ids_text([message_id for message_id, _ in messages])
    sizes = ",".join([str(size) for _, size in messages])
    return f'{head}"message_ids":[{ids}],"sizes":[{sizes}]}}'.encode()


def encode_received(ts_ms: int, queue: str, messages: Sequence[tuple[str, int]]) -> bytes:
    head = f'{{"v":{VERSION},"type":"{RECEIVED}","ts":{ts_ms:d}{queue},"count":{len(messages):d},'
    if len(messages) == 1:
        ((message_id, receive_count),) = messages
        return (
            f'{head}"message_id":{_id_text(message_id)},"receive_count":{receive_count:d}}}'
        ).encode()
    ids = _ids_text([message_id for message_id, _ in messages])
    counts = ",".join([str(receive_count) for _, receive_count in messages])
    return f'{head}"message_ids":[{ids}],"receive_counts":[{counts}]}}'.encode()


def encode_deleted(ts_ms: int, queue: str, message_ids: Sequence[str]) -> bytes:
    head = f'{{"v":{VERSION},"type":"{DELETED}","ts":{ts_ms:d}{queue},"count":{len(message_ids):d},'
    if len(message_ids) == 1:
        return f'{head}"message_id":{_id_text(message_ids[0])}}}'.encode()
    return f'{head}"message_ids":[{_ids_text(message_ids)}]}}'.encode()


def empty_receive(
    ts_ms: int, account_id: str, queue_name: str, *, region: str, count: int = 1
) -> Event:
    """`count` empty receives of one queue, the first at `ts_ms` (all in the same minute)."""
    return _base(EMPTY_RECEIVE, ts_ms, account_id, queue_name, region, count=count)


def moved_to_dlq(
    ts_ms: int,
    account_id: str,
    dlq_name: str,
    source_queue: str,
    message_id: str,
    receive_count: int,
    sent_ms: int,
    attributes: Mapping[str, AttributeValue],
    *,
    region: str,
) -> Event:
    """A message a receive moved to a dead-letter queue; keyed by the DLQ."""
    return {
        **_base(MOVED_TO_DLQ, ts_ms, account_id, dlq_name, region),
        "message_id": message_id,
        "receive_count": receive_count,
        "age_ms": ts_ms - sent_ms,
        "source_queue": source_queue,
        "attributes": {name: attribute_text(value) for name, value in attributes.items()},
    }


def attribute_text(value: AttributeValue) -> str:
    """String and Number values as they are, Binary as base64; cut to 256 characters."""
    if value.binary_value is not None:
        text = base64.b64encode(value.binary_value).decode("ascii")
    else:
        text = value.string_value or ""
    return text[:MAX_ATTRIBUTE_VALUE_CHARS]


def expired(ts_ms: int, account_id: str, queue_name: str, message_id: str, *, region: str) -> Event:
    return {**_base(EXPIRED, ts_ms, account_id, queue_name, region), "message_id": message_id}


def purged(ts_ms: int, account_id: str, queue_name: str, messages: int, *, region: str) -> Event:
    return _base(PURGED, ts_ms, account_id, queue_name, region, count=messages)


def gauges(
    ts_ms: int,
    account_id: str,
    queue_name: str,
    visible: int,
    not_visible: int,
    delayed: int,
    oldest_age_s: int,
    *,
    region: str,
) -> Event:
    return {
        **_base(GAUGES, ts_ms, account_id, queue_name, region),
        "visible": visible,
        "not_visible": not_visible,
        "delayed": delayed,
        "oldest_age_s": oldest_age_s,
    }
