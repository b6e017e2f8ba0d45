"""The side-by-side benchmark's open-loop workload (o) against a stand-in server.

The stand-in answers every call after 2 ms, except during one stall, when calls wait for the
stall to end, as they would behind a server that stopped answering for a moment.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.sidebyside.loadgen import Client
from bench.sidebyside.workloads import OpenLoopParams, open_loop


class StallingServer(Client):
    def __init__(self, stall_from_s: float, stall_s: float) -> None:
        super().__init__("http://stand-in", pool=1)
        self.calls: dict[str, int] = {}
        self._began = time.perf_counter()
        self._stall = (self._began + stall_from_s, self._began + stall_from_s + stall_s)

    async def call(self, action: str, body: dict[str, Any], record: bool = True) -> dict[str, Any]:
        self.calls[action] = self.calls.get(action, 0) + 1
        now = time.perf_counter()
        if self._stall[0] <= now < self._stall[1]:
            await asyncio.sleep(self._stall[1] - now)
        await asyncio.sleep(0.002)
        if action == "CreateQueue":
            return {"QueueUrl": "http://stand-in/000000000000/q"}
        if action == "ReceiveMessage":
            return {"Messages": [{"ReceiptHandle": "h", "Body": "b"}]}
        return {}


async def test_open_loop_offers_the_fixed_rate_and_counts_a_stall_from_the_scheduled_times() -> (
    None
):
    # Given a server that stalls for 0.4 s in the middle of a 1 s run at 40 messages/s
    server = StallingServer(stall_from_s=0.3, stall_s=0.4)

    # When the open loop runs against it
    result = await open_loop(server, OpenLoopParams(rate_per_s=40, duration_s=1.0, grace_s=5))

    # Then every scheduled operation was issued, whatever the stall: 40 sends, 40 receives
    assert result["offered_operations"] == 80
    assert server.calls["SendMessage"] == 40
    assert server.calls["ReceiveMessage"] == 40
    assert result["sent"] == 40 and result["received_deleted"] == 40
    assert result["unfinished_after_grace"] == 0
    # and the operations scheduled at the start of the stall waited for nearly all of it,
    # measured from their scheduled time (a closed loop would have stopped issuing instead)
    assert result["send_p99_ms"] >= 300
    assert result["recv_del_p99_ms"] >= 300
