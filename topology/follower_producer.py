"""A producer for records that follow a durable record elsewhere (the lease changelog follows
the lease store's synced WAL): noted on the request path, handed to librdkafka in bursts, the
latest value of each key; nobody waits for them unless asked to (`confirmed`).

The durability settings and the failure are the queue producer's (`producer.py`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.producer import DURABLE_SETTINGS, ProduceFailed
from topology.stall import SETTLE_S, STALL_S

log = logging.getLogger("kqs.producer")


def _follow(
    follower: concurrent.futures.Future[None], leader: concurrent.futures.Future[None] | None
) -> None:
    """Settle `follower` as `leader` settles (at once when there is no leader: nothing
    was handed over, so nothing waits)."""
    if leader is None:
        follower.set_result(None)
        return

    def settle(done: concurrent.futures.Future[None]) -> None:
        error = done.exception()
        if error is None:
            follower.set_result(None)
        else:
            follower.set_exception(error)

    leader.add_done_callback(settle)


class FollowerProducer:
    """Produces records that follow a durable record elsewhere (the lease changelog follows
    the lease store's synced WAL): nobody waits for them, so no delivery report is raised
    but a failure's.

    The durability settings stay (idempotence keeps each partition's records in order, which
    the compacted changelog needs: a retried older fact must never land after a newer one).
    `produce` only notes the record; `hand_over` gives what was noted to librdkafka, keeping
    the latest value of each key. This producer's own thread hands over every `HAND_OVER_S`;
    with several gateways the gateway also hands over right after each lease-store sync and
    waits for the acknowledgement (`confirmed`). So a key written twice in between (a
    message received and deleted) is produced once, as the compacted topic would keep it
    anyway, and librdkafka is called in bursts rather than per record.

    librdkafka then waits up to `FOLLOW_LINGER_MS` to fill a produce request: each request
    costs the broker's one request thread ~0.15 ms whatever it carries, and with one
    gateway a lease change's durable record is the synced WAL, so the changelog may lag by
    that much (`pending` says how many records are not in Kafka yet). Measured on 2026-11-25
    (bench/results/archive/profile-journal.md, 2026-11-25 (fb2b124)): with 5 ms, single calls ran 7 % slower and the broker spent a quarter
    more CPU per message. With `confirmed` (several gateways: the changelog is the durable
    record and a change waits for it) the linger stays short.
    """

    HAND_OVER_S = 0.05
    FOLLOW_LINGER_MS = 50
    CONFIRMED_LINGER_MS = 5

    def __init__(
        self,
        bootstrap: str,
        name: str,
        confirmed: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        # Written by the poll thread, and by a hand-over on the loop whose record librdkafka
        # refuses at once (a lost increment would only undercount a metric).
        self.failures = 0
        self.dropped = 0  # records `drop_unsent` took out of librdkafka's queue (poll thread)
        self.last_error = ""
        # With `confirmed`, `hand_over` returns a future of the acknowledgement of everything
        # handed over so far (several gateways: the changelog is then what another gateway
        # restores a partition from, so a change may only be answered once it is there).
        self._confirmed = confirmed
        self._last_handed: concurrent.futures.Future[None] | None = None
        self._producer = Producer(
            {
                **connection(bootstrap),
                **DURABLE_SETTINGS,
                "linger.ms": self.CONFIRMED_LINGER_MS if confirmed else self.FOLLOW_LINGER_MS,
                "delivery.report.only.error": not confirmed,
                "on_delivery": self._on_delivery,
                "logger": LIBRDKAFKA,
            }
        )
        # (topic, key) -> value, in first-noted order; swapped out whole under the lock.
        self._noted: dict[tuple[str, bytes], bytes | None] = {}
        self._noted_lock = threading.Lock()
        # One hand-over at a time (the loop's and this thread's): the records of a key must
        # reach librdkafka in the order they were noted.
        self._hand_over_lock = threading.Lock()
        # After a stall (`_holding`): the hold's end, and the future `hand_over` returns
        # meanwhile (settled as the hand-over that ends the hold, or failed by `drop_unsent`).
        self._monotonic = monotonic
        self._last_pass = monotonic()  # the poll thread's last pass
        self._hold_until = float("-inf")
        self._held: concurrent.futures.Future[None] | None = None
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._poll_forever, name=name, daemon=True)
        self._poller.start()

    def produce(self, topic: str, value: bytes | None, key: bytes) -> None:
        """Note a record for the next hand-over (calls keep their order per key)."""
        with self._noted_lock:
            self._noted[(topic, key)] = value

    def produce_many(self, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
        """`produce` for several `(key, value)` records, in their order."""
        with self._noted_lock:
            noted = self._noted
            for key, value in records:
                noted[(topic, key)] = value

    def hand_over(self) -> concurrent.futures.Future[None] | None:
        """Give librdkafka every record noted so far, without waiting for Kafka.

        With `confirmed`: returns the future of the acknowledgement of the last record handed
        over so far (by this call or the thread's), which on the one-partition idempotent
        changelog comes after every earlier one's; None when nothing was ever handed over.
        While a stall holds the records (`_holding`), the future of the hand-over that ends
        the hold.
        """
        self._hand_over()
        return self._held or self._last_handed

    @property
    def pending(self) -> int:
        """Records noted or handed over that Kafka has not acknowledged yet."""
        return len(self._noted) + len(self._producer)

    def flush(self, timeout_s: float = 30.0) -> int:
        """Hand over what is noted and wait for it; returns how many are still undelivered.

        Even during a hold: flushed when partitions are released (revoked, so still this
        gateway's until then) and at shutdown."""
        self._hand_over(force=True)
        remaining: int = self._producer.flush(timeout_s)
        return remaining

    def drop_unsent(self) -> int:
        """Forget every record not sent to Kafka yet: those noted (returns how many) and
        those librdkafka still queues (counted in `dropped` as their reports come; a
        waiter's future fails).

        For a gateway that lost partitions to another (`gateway/cluster/ownership.py`): its records
        waiting for a broker that is down would otherwise reach the changelog whenever the
        broker is back, perhaps after the partition's next owner restored from it, and be
        read by the partition's restore after that, over what the next owner did (a lease
        after a tombstone: a deleted message back). What is dropped for the partitions still
        served here costs no more than a failed delivery: a receive's fact (at worst a
        message delivered again after a restore), or the confirmation of a change, which
        then fails, so its client retries.
        """
        with self._hand_over_lock:
            with self._noted_lock:
                noted, self._noted = len(self._noted), {}
            self._producer.purge(in_queue=True, in_flight=False, blocking=False)
            if self._held is not None:
                held, self._held = self._held, None
                held.set_exception(ProduceFailed(KafkaError(KafkaError._PURGE_QUEUE)))
        return noted

    def close(self) -> None:
        self._stopping.set()
        self._poller.join(timeout=5)
        remaining = self.flush()
        if remaining:
            log.warning("producer closed with undelivered records", extra={"remaining": remaining})

    def _poll_forever(self) -> None:
        # With one gateway this thread is the only one that hands records over: it must
        # outlive any one failure, or the changelog would silently stop following.
        while not self._stopping.is_set():
            try:
                self._producer.poll(self.HAND_OVER_S)
                self._hand_over()
                self._last_pass = self._monotonic()
            except Exception:
                log.exception("follower hand-over failed; trying again")
                self._stopping.wait(self.HAND_OVER_S)

    def _holding(self) -> bool:
        """Whether the noted records wait: the poll thread's last pass is `STALL_S` old (the
        process stood still; noticed by whoever hands over first on waking), or was less
        than `SETTLE_S` ago (`topology/stall.py`).

        A gateway stopped past its group session was evicted while it slept; its partitions'
        next owners restored them from the changelog without the records noted here then.
        Handed over on waking, before the loss reaches `drop_unsent`, they would land after
        those owners' records, and a later restore would read them over what those owners
        did (a receive's lease after its delete's tombstone: a deleted message back; the
        crash suite's SIGSTOP run). Records librdkafka already had when the process stopped
        are sent on waking all the same: this shortens that window, it cannot close it."""
        if not self._confirmed:
            return False  # one gateway: nobody else restores from the changelog
        now = self._monotonic()
        if now - self._last_pass >= STALL_S:
            self._hold_until = now + SETTLE_S
            self._last_pass = now  # one stall, one hold
            log.warning(
                "the changelog producer stood still: its records wait for the group's word",
                extra={"hold_s": SETTLE_S, "noted": len(self._noted)},
            )
        return now < self._hold_until

    def _hand_over(self, force: bool = False) -> None:
        with self._hand_over_lock:
            if not force and self._holding():
                if self._held is None:
                    self._held = concurrent.futures.Future()
                return
            with self._noted_lock:
                noted, self._noted = self._noted, {}
            last = len(noted) - 1
            marker: concurrent.futures.Future[None] | None = None
            refused: KafkaError | None = None
            for i, ((topic, key), value) in enumerate(noted.items()):
                extra: dict[str, Any] = {}
                if self._confirmed and i == last:
                    marker = concurrent.futures.Future()
                    extra["on_delivery"] = self._marker_callback(marker)
                try:
                    self._produce(topic, value, key, extra)
                except KafkaException as error:
                    # Refused at once by librdkafka (a record over its size limit): counted as
                    # a failed delivery, and never awaited as if it could still arrive.
                    refused = error.args[0]
                    self._on_delivery(refused, None)
            if marker is not None and refused is not None:
                # A change whose record was refused must not be confirmed by the records
                # handed over with it: their waiters fail (and retry) instead.
                marker = concurrent.futures.Future()
                marker.set_exception(ProduceFailed(refused))
            if marker is not None:
                self._last_handed = marker
            if self._held is not None:  # the hold is over: its waiters' records went now
                held, self._held = self._held, None
                _follow(held, self._last_handed)

    def _produce(self, topic: str, value: bytes | None, key: bytes, extra: dict[str, Any]) -> None:
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, **extra)
                return
            except BufferError:
                self._producer.poll(0.01)  # the local queue is full: let it drain

    def _marker_callback(
        self, marker: concurrent.futures.Future[None]
    ) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(error: KafkaError | None, msg: Message) -> None:
            self._on_delivery(error, msg)
            if error is None:
                marker.set_result(None)
            else:
                marker.set_exception(ProduceFailed(error))

        return on_delivery

    def _on_delivery(self, error: KafkaError | None, _msg: Message | None) -> None:
        if error is not None and error.code() == KafkaError._PURGE_QUEUE:
            self.dropped += 1  # taken out of librdkafka's queue by `drop_unsent`
        elif error is not None:
            self.failures += 1
            self.last_error = str(error)
            log.warning(
                "follower record not delivered",
                extra={"error": self.last_error, "failures": self.failures},
            )
