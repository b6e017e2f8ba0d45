"""With several gateways a delivered record is applied only in the spell of serving its
partition that its delivery report came in (`Applying._in_this_spell`, issue 55).

A record of ours that arrived past a gap waits in `_ahead` for ingest to fill the gap. If
the partition is released meanwhile and served again later (by then another gateway may
have served it and delivered that record), the waiting record belongs to the earlier
spell: it is left to the restore or ingest of the new spell, and its send answers at once
instead of waiting out `INGEST_WAIT_S` for a gap this spell never fills from `_ahead`.
"""

from __future__ import annotations

import asyncio

from tests.support.builders import a_message
from tests.support.in_process_gateway import QUEUE, gateway_serving_the_queue, take
from topology.catalog import partition_keys
from topology.producer import Delivered


async def test_a_record_delivered_in_an_earlier_spell_is_not_applied_in_a_later_one() -> None:
    messages, ownership = await gateway_serving_the_queue()
    pk = partition_keys(QUEUE)[0]
    first_spell = ownership.serving_since(QUEUE.topic, 0)

    # Offset 1 is ours; offset 0, another producer's, has not been ingested: 1 waits.
    sent = asyncio.get_running_loop().create_future()
    messages._delivered(a_message("ours"), sent, Delivered(QUEUE.topic, 0, 1, 0))
    messages._apply_delivered()
    assert not sent.done() and 1 in messages._ahead[pk]

    # The partition is released, then served again: a new spell.
    await asyncio.to_thread(ownership.revoked, [(QUEUE.topic, 0)])
    await take(ownership)
    assert ownership.serving_since(QUEUE.topic, 0) != first_spell

    # The next record of the new spell finds the earlier one gone, and its send answered.
    later = asyncio.get_running_loop().create_future()
    messages._delivered(a_message("later"), later, Delivered(QUEUE.topic, 0, 3, 0))
    messages._apply_delivered()
    assert sent.done()
    assert sorted(messages._ahead[pk]) == [3]
    assert messages._leases.applied_offset(pk) == -1  # nothing applied past the gap


async def test_one_spell_keeps_its_records_waiting_for_the_gap() -> None:
    messages, ownership = await gateway_serving_the_queue()
    pk = partition_keys(QUEUE)[0]
    loop = asyncio.get_running_loop()
    waiting = [loop.create_future() for _ in range(2)]
    for offset, future in zip((1, 2), waiting, strict=True):
        messages._delivered(a_message(f"m{offset}"), future, Delivered(QUEUE.topic, 0, offset, 0))
        messages._apply_delivered()
    assert sorted(messages._ahead[pk]) == [1, 2]
    assert not any(f.done() for f in waiting)
    messages.on_ingested(QUEUE.topic, 0, [(0, a_message("theirs"))])
    assert all(f.done() for f in waiting)
    assert messages._leases.applied_offset(pk) == 2
