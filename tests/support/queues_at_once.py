"""Queues created and used at once through several gateways: the moment a new queue's
partitions are still being shared out between them is when a record could be applied by two
(issue 55). Every queue gets its own thread, which creates it through the first endpoint and
sends and receives through all of them in turn, one connection per call; nothing is deleted,
so a message delivered again before its lease ran out shows in the `LeaseLedger`."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.config import Config

from tests.support.harness import client_for
from tests.support.lease_ledger import LeaseLedger, describe

# Long enough that no lease ends during a run: any second delivery is one inside a lease.
VISIBILITY_S = 300


@dataclass
class Outcome:
    sent: int
    ledger: LeaseLedger
    missing: set[str]

    @property
    def twice(self) -> int:
        return len(self.ledger.twice_inside_a_lease())

    def report(self) -> str:
        return (
            f"sent {self.sent}, received {len(self.ledger.keys())} distinct "
            f"({self.ledger.count()} deliveries), lost {len(self.missing)}, "
            f"{describe(self.ledger.twice_inside_a_lease())}"
        )


def _client(protocol: str, endpoint: str) -> Any:
    # One connection, so that with SO_REUSEPORT (`--workers`) calls spread over the workers;
    # retries as an SDK's (a partition moving answers ServiceUnavailable for a moment).
    return client_for(
        protocol,
        endpoint,
        config=Config(max_pool_connections=1, retries={"max_attempts": 8, "mode": "standard"}),
    )


def use_queues_at_once(
    endpoints: Sequence[str],
    queues: int,
    messages: int,
    protocols: Sequence[str] = ("json", "query"),
    receive_for_s: float = 60.0,
    prefix: str = "at-once",
) -> Outcome:
    """Create `queues` queues at once through `endpoints[0]`, send `messages` to each through
    every endpoint in turn (batches of ten), and receive through every endpoint in turn with a
    `VISIBILITY_S` lease until each message came (or `receive_for_s` passed), then keep
    receiving a little longer to catch late second deliveries. Queue i speaks
    `protocols[i % len(protocols)]`."""
    ledger = LeaseLedger()
    bodies_of: dict[str, str] = {}  # MessageId -> body
    run = uuid.uuid4().hex[:6]

    def one_queue(i: int) -> int:
        protocol = protocols[i % len(protocols)]
        name = f"{prefix}-{run}-{i}"
        url = _client(protocol, endpoints[0]).create_queue(QueueName=name)["QueueUrl"]
        bodies = [f"{name}/{n}" for n in range(messages)]
        for turn, start in enumerate(range(0, messages, 10)):
            entries = [
                {"Id": str(k), "MessageBody": body}
                for k, body in enumerate(bodies[start : start + 10])
            ]
            answer = _client(protocol, endpoints[turn % len(endpoints)]).send_message_batch(
                QueueUrl=url, Entries=entries
            )
            assert not answer.get("Failed"), answer.get("Failed")
        wanted = set(bodies)
        deadline = time.monotonic() + receive_for_s
        # After the last one came, a few more empty rounds through every endpoint: a second
        # delivery would come from whichever gateway restored the message as visible.
        quiet_rounds = 0
        turn = 0
        while time.monotonic() < deadline and quiet_rounds < 2 * len(endpoints):
            endpoint = endpoints[turn % len(endpoints)]
            turn += 1
            asked_at = time.monotonic()
            answer = _client(protocol, endpoint).receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=VISIBILITY_S,
                WaitTimeSeconds=1,
            )
            got = answer.get("Messages", [])
            for message in got:
                # By MessageId: a send retried by the SDK after an answer it never got is
                # another message with the same body, which SQS allows too.
                ledger.received(
                    message["MessageId"], message["ReceiptHandle"], asked_at, VISIBILITY_S, endpoint
                )
                bodies_of[message["MessageId"]] = message["Body"]
            wanted -= {m["Body"] for m in got}
            if not wanted and not got:
                quiet_rounds += 1
        return messages

    with concurrent.futures.ThreadPoolExecutor(max_workers=queues) as pool:
        sent = sum(pool.map(one_queue, range(queues)))
    every = {f"{prefix}-{run}-{i}/{n}" for i in range(queues) for n in range(messages)}
    return Outcome(sent=sent, ledger=ledger, missing=every - set(bodies_of.values()))
