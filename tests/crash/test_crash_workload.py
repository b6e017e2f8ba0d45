"""The crash workload's consumers leave a message to time out at most once.

Issue 18's "undeletable" message of the hand-over runs (`tests/crash/test_crash.py`) was the
workload's own: a consumer left about one delivery in seven undeleted by its turn number
alone, and once a single message was left in the queues, the turns of the 1 s long polls fell
in step with its 10 s visibility timeout, so every delivery of it came on a turn that skipped
it — received every 10 s through both gateways, no delete of it ever tried, while the
gateways answered everything. The stand-in client below returns the message on exactly those
turns, as the run did; no gateway is involved.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from tests.support.crash_workload import Sent, Workload, _message

QUEUE_URL = "http://127.0.0.1:1/000000000000/crash-0"
TOKEN = "p0-648"
MESSAGE_ID = "af250698-6719-4c83-88f8-f1f459df3a8c"
TURNS = 100  # bounded: the consumer stops after this many receives


class InStepQueue:
    """One message, delivered by every seventh receive (the turns a rule by turn skips)."""

    def __init__(self, consuming: threading.Event) -> None:
        self.meta = SimpleNamespace(endpoint_url="http://127.0.0.1:1")
        self._consuming = consuming
        self.receives = 0
        self.deletes_at: list[int] = []  # the receive count at each DeleteMessage

    def receive_message(self, **_: Any) -> dict[str, Any]:
        self.receives += 1
        if self.receives >= TURNS:
            self._consuming.clear()
        if self.receives % 7:
            return {}
        sent = _message(TOKEN)
        return {
            "Messages": [
                {
                    "MessageId": MESSAGE_ID,
                    "ReceiptHandle": f"handle-{self.receives}",
                    "Body": sent.body,
                    "MessageAttributes": sent.attributes,
                }
            ]
        }

    def delete_message(self, **_: Any) -> dict[str, Any]:
        self.deletes_at.append(self.receives)
        self._consuming.clear()  # deleted: nothing more to receive
        return {}


def test_a_message_delivered_on_every_skipping_turn_is_deleted_at_its_second_delivery() -> None:
    # Given a consumer whose receives return the one message on every seventh turn
    workload = Workload(QUEUE_URL.split("/0000")[0], [QUEUE_URL], producers=0, consumers=1)
    sent = _message(TOKEN)
    workload.ledger.attempted[TOKEN] = Sent(QUEUE_URL, sent.body, sent.attributes)
    workload.ledger.acknowledged[TOKEN] = MESSAGE_ID
    queue = InStepQueue(workload._consuming)
    workload._client = lambda index: queue  # type: ignore[method-assign]

    # When the consumer runs (on this thread, until deleted or after TURNS receives)
    workload._consuming.set()
    workload._consume(0)

    # Then its first delivery was left to time out and its second one deleted
    assert queue.deletes_at == [14]
    assert workload.ledger.undeleted() == set()
    assert workload.ledger.left_to_time_out == {MESSAGE_ID}
    assert "left to time out once" in workload.ledger.story(TOKEN)
    assert workload.ledger.verdict().corrupt == []
