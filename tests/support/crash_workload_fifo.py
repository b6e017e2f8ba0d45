"""A FIFO workload that keeps going through crashes, and its accounting.

Each producer owns a few message groups and sends each group's messages one after another,
message n+1 only once n was acknowledged. A send that fails is retried with the same
MessageDeduplicationId until it is acknowledged, so a retry of a send that did land must be
answered as a duplicate. Consumers receive, check and delete (leaving some to time out).
`FifoLedger.verdict` then requires:

- every acknowledged message was delivered (nothing acknowledged is lost);
- every delivery of a message carries the MessageId its send was acknowledged with, and one
  token never arrives under two MessageIds (no deduplicated send was enqueued twice);
- bodies arrive intact, in their own queue and group;
- no group is delivered out of order: within a receive a group's messages come in send
  order, and a receive that returns message m of a group after an earlier receive (one that
  had ended before it began) returned a later message n of that group, is allowed only if
  that earlier receive returned m too (both were redelivered together, as SQS does when
  their leases end); anything else means n was delivered while m was still to come;
- no message was delivered again while an earlier delivery's lease still held
  (`tests/support/lease_ledger.py`).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from traceback import format_exc
from typing import Any

from botocore.exceptions import ClientError

from tests.support.crash_workload import _CONNECTION_ERRORS, RECEIVE_WAIT_S
from tests.support.harness import NO_RETRIES, json_client, query_client
from tests.support.lease_ledger import LeaseLedger

# Shorter than the standard workload's: a message left to time out holds its whole group.
VISIBILITY_TIMEOUT_S = 5
GROUPS_PER_PRODUCER = 3


@dataclass(frozen=True, slots=True)
class Receive:
    """One ReceiveMessage call: when it ran, and what it returned (token order kept)."""

    queue_url: str
    began: float
    ended: float
    tokens: tuple[str, ...]


def parse_token(token: str) -> tuple[str, int]:
    """(group, sequence) of a token `<group>-<n>`."""
    group, n = token.rsplit("-", 1)
    return group, int(n)


@dataclass
class FifoLedger:
    sent_to: dict[str, str] = field(default_factory=dict)  # token -> queue URL
    acknowledged: dict[str, str] = field(default_factory=dict)  # token -> MessageId
    delivered_ids: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    receives: list[Receive] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)  # tokens whose deletion was acknowledged
    retried: set[str] = field(default_factory=set)  # tokens whose first send failed
    leases: LeaseLedger = field(default_factory=LeaseLedger)  # by MessageId
    gateway_kills: list[float] = field(default_factory=list)  # as `Ledger.gateway_kills`
    lock: threading.Lock = field(default_factory=threading.Lock)

    def undeleted(self) -> set[str]:
        with self.lock:
            return set(self.acknowledged) - self.deleted

    def gateway_killed(self) -> None:
        with self.lock:
            self.gateway_kills.append(time.monotonic())

    def verdict(self) -> FifoVerdict:
        with self.lock:
            twice_in_lease = self.leases.twice_inside_a_lease()
            after_a_crash = self.leases.after_a_crash(twice_in_lease, self.gateway_kills)
            lost = sorted(set(self.acknowledged) - set(self.delivered_ids))
            twice = sorted(t for t, ids in self.delivered_ids.items() if len(ids) > 1)
            wrong_id = sorted(
                t
                for t, ids in self.delivered_ids.items()
                if t in self.acknowledged and ids != {self.acknowledged[t]}
            )
            return FifoVerdict(
                acknowledged=len(self.acknowledged),
                receives=len(self.receives),
                deliveries=sum(len(r.tokens) for r in self.receives),
                lost=lost,
                enqueued_twice=twice,
                wrong_id=wrong_id,
                out_of_order=out_of_order(self.receives),
                corrupt=list(self.corrupt),
                crashed=list(self.crashed),
                failures=len(self.failures),
                retried_sends=len(self.retried & set(self.acknowledged)),
                twice_inside_a_lease=len(twice_in_lease) - len(after_a_crash),
                twice_after_a_crash=len(after_a_crash),
            )


def out_of_order(receives: list[Receive]) -> list[str]:
    """The order violations among `receives` (see the module header)."""
    problems: list[str] = []
    by_group: dict[tuple[str, str], list[tuple[Receive, list[int]]]] = defaultdict(list)
    for receive in receives:
        numbers: dict[str, list[int]] = defaultdict(list)
        for token in receive.tokens:
            group, n = parse_token(token)
            numbers[group].append(n)
        for group, ns in numbers.items():
            if ns != sorted(ns) or len(set(ns)) != len(ns):
                problems.append(f"{group}: one receive returned {ns}")
            by_group[(receive.queue_url, group)].append((receive, ns))
    for (_, group), seen in by_group.items():
        seen.sort(key=lambda item: item[0].began)
        for receive, ns in seen:
            for earlier, earlier_ns in seen:
                if earlier.ended >= receive.began:
                    continue
                for m in ns:
                    if any(n > m for n in earlier_ns) and m not in earlier_ns:
                        problems.append(f"{group}: {m} delivered after {max(earlier_ns)} had been")
    return problems


@dataclass(frozen=True)
class FifoVerdict:
    acknowledged: int
    receives: int
    deliveries: int
    lost: list[str]
    enqueued_twice: list[str]
    wrong_id: list[str]
    out_of_order: list[str]
    corrupt: list[str]
    crashed: list[str]
    failures: int
    retried_sends: int
    twice_inside_a_lease: int  # none explained by a gateway's SIGKILL
    twice_after_a_crash: int

    def summary(self) -> str:
        return (
            f"FIFO: acknowledged {self.acknowledged}; {self.deliveries} deliveries in "
            f"{self.receives} receives; lost {len(self.lost)}, enqueued twice "
            f"{len(self.enqueued_twice)}, wrong id {len(self.wrong_id)}, out of order "
            f"{len(self.out_of_order)}, corrupt {len(self.corrupt)}, delivered twice inside a "
            f"lease {self.twice_inside_a_lease} (and {self.twice_after_a_crash} after the SIGKILL "
            f"of a gateway); failed calls "
            f"{self.failures}, {self.retried_sends} acknowledged sends needed a retry (same "
            "deduplication id)"
        )


def body_of(token: str) -> str:
    return f"{token}|fifo caf\u00e9 " + "y" * (len(token) * 13 % 150)


class FifoWorkload:
    """Producer and consumer threads over FIFO queues, until `stop()`."""

    def __init__(self, endpoint: str, queue_urls: list[str], producers: int, consumers: int):
        self.endpoint = endpoint
        self.queue_urls = queue_urls
        self.ledger = FifoLedger()
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._draining = threading.Event()  # as `Workload._draining`
        self._producers = [
            threading.Thread(target=self._guarded, args=(self._produce, i), name=f"fproducer-{i}")
            for i in range(producers)
        ]
        self._threads = self._producers + [
            threading.Thread(target=self._guarded, args=(self._consume, i), name=f"fconsumer-{i}")
            for i in range(consumers)
        ]

    def _guarded(self, loop: Callable[[int], None], index: int) -> None:
        try:
            loop(index)
        except Exception:  # noqa: BLE001 - reported by FifoVerdict.crashed
            with self.ledger.lock:
                self.ledger.crashed.append(f"{threading.current_thread().name}: {format_exc()}")

    def _client(self, index: int) -> Any:
        make = json_client if index % 2 == 0 else query_client
        return make(self.endpoint, NO_RETRIES)

    def start(self) -> None:
        self._producing.set()
        self._consuming.set()
        for thread in self._threads:
            thread.start()

    def stop_producing(self) -> None:
        self._producing.clear()
        self._draining.set()
        for thread in self._producers:
            thread.join(timeout=120)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def stop(self) -> None:
        self._producing.clear()
        self._consuming.clear()
        for thread in self._threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def drain(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.ledger.undeleted():
            time.sleep(0.5)

    def _produce(self, index: int) -> None:
        sqs = self._client(index)
        next_n = [1] * GROUPS_PER_PRODUCER
        turn = 0
        while self._producing.is_set():
            turn += 1
            k = turn % GROUPS_PER_PRODUCER
            group = f"p{index}g{k}"
            url = self.queue_urls[(index + k) % len(self.queue_urls)]
            token = f"{group}-{next_n[k]}"
            with self.ledger.lock:
                self.ledger.sent_to[token] = url
            # The same deduplication id until acknowledged: a retry of a send that landed
            # must come back as the original.
            while True:
                message_id = self._send(sqs, url, group, token, batch=turn % 5 == 0)
                if message_id is not None:
                    break
                with self.ledger.lock:
                    self.ledger.retried.add(token)
                time.sleep(0.2)
            with self.ledger.lock:
                self.ledger.acknowledged[token] = message_id
            next_n[k] += 1

    def _send(self, sqs: Any, url: str, group: str, token: str, batch: bool) -> str | None:
        try:
            if batch:
                response = sqs.send_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {
                            "Id": "e0",
                            "MessageBody": body_of(token),
                            "MessageGroupId": group,
                            "MessageDeduplicationId": token,
                        }
                    ],
                )
                if response.get("Failed"):
                    with self.ledger.lock:
                        self.ledger.failures.append(f"send:{response['Failed'][0]['Code']}")
                    return None
                message_id: str = response["Successful"][0]["MessageId"]
                return message_id
            sent: str = sqs.send_message(
                QueueUrl=url,
                MessageBody=body_of(token),
                MessageGroupId=group,
                MessageDeduplicationId=token,
            )["MessageId"]
            return sent
        except (ClientError, *_CONNECTION_ERRORS) as error:
            with self.ledger.lock:
                self.ledger.failures.append(f"send:{type(error).__name__}")
            return None

    def _consume(self, index: int) -> None:
        sqs = self._client(index + 1)
        turn = 0
        while self._consuming.is_set():
            turn += 1
            url = self.queue_urls[(index + turn) % len(self.queue_urls)]
            began = time.monotonic()
            try:
                messages = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=RECEIVE_WAIT_S,
                    VisibilityTimeout=VISIBILITY_TIMEOUT_S,
                    AttributeNames=["MessageGroupId"],
                ).get("Messages", [])
            except (ClientError, *_CONNECTION_ERRORS) as error:
                with self.ledger.lock:
                    self.ledger.failures.append(f"receive:{type(error).__name__}")
                time.sleep(0.2)
                continue
            ended = time.monotonic()
            for message in messages:
                self.ledger.leases.received(
                    message["MessageId"], message["ReceiptHandle"], began, VISIBILITY_TIMEOUT_S
                )
            tokens = tuple(m["Body"].split("|", 1)[0] for m in messages)
            with self.ledger.lock:
                self.ledger.receives.append(Receive(url, began, ended, tokens))
                for token, message in zip(tokens, messages, strict=True):
                    self.ledger.delivered_ids[token].add(message["MessageId"])
                    group, _ = parse_token(token)
                    if message["Body"] != body_of(token):
                        self.ledger.corrupt.append(f"{token}: body differs")
                    elif self.ledger.sent_to.get(token) != url:
                        self.ledger.corrupt.append(f"{token}: delivered from {url}")
                    elif message["Attributes"]["MessageGroupId"] != group:
                        self.ledger.corrupt.append(f"{token}: in group {message['Attributes']}")
            for number, (token, message) in enumerate(zip(tokens, messages, strict=True)):
                leaving = turn % 11 == 0 and not self._draining.is_set()
                if leaving and number == len(messages) - 1:
                    # Left to time out (as consumers crash too): redelivered, and its group
                    # held back meanwhile. Rare, or the groups would mostly wait.
                    break
                if not self._delete(sqs, url, message):
                    break  # keep the group's order: the rest waits for the lease to end
                with self.ledger.lock:
                    self.ledger.deleted.add(token)

    def _delete(self, sqs: Any, url: str, message: dict[str, Any]) -> bool:
        deadline = time.monotonic() + 2 * VISIBILITY_TIMEOUT_S
        while time.monotonic() < deadline and self._consuming.is_set():
            try:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                return True
            except (ClientError, *_CONNECTION_ERRORS) as error:
                with self.ledger.lock:
                    self.ledger.failures.append(f"delete:{type(error).__name__}")
                if isinstance(error, ClientError) and error.response["Error"]["Code"] in (
                    "InvalidParameterValue",
                    "ReceiptHandleIsInvalid",
                ):
                    return False  # the lease ended: the message comes again
                time.sleep(0.2)
        return False
