"""Which gateways are alive on a cluster, in which mode: the `kqs-gateways` consumer group.

Every gateway, whatever its partition ownership mode, is a member of this group while it runs
(`GatewayPresence`), with a client id that names its mode and its identity
(`kqs/<mode>/<gateway id>`). Kafka, not KQS, decides who is alive: a gateway that stops leaves
the group (a LeaveGroup at shutdown), one that dies drops out when its session times out
(`SESSION_TIMEOUT_MS`). So a starting gateway learns who else serves the cluster from one
DescribeConsumerGroups (`TopicAdmin.group_members`), which a single gateway in mode `all`
needs: it never joins the ingest group, so it was invisible to other gateways before.

The member subscribes to the catalog topic, which every deployment has, and pauses whatever
it is assigned: it never fetches a record. Its thread polls once a second to stay a member.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.names import CATALOG_TOPIC

log = logging.getLogger("kqs.presence")

PRESENCE_GROUP = "kqs-gateways"
# The broker's minimum by default, as the ingest group's (topology/ingest.py): a SIGKILLed
# gateway stops counting as alive after this.
SESSION_TIMEOUT_MS = 6000
_PREFIX = "kqs/"


@dataclass(frozen=True)
class Member:
    mode: str  # "all" or "group"
    gateway: str  # the gateway's id (`<data-dir>/gateway-id`)
    host: str

    def __str__(self) -> str:
        return f"{self.gateway} ({self.mode}) on {self.host}"


def client_id(mode: str, gateway: str) -> str:
    return f"{_PREFIX}{mode}/{gateway}"


def parse_member(member: str) -> Member | None:
    """A `client_id@host` of `TopicAdmin.group_members`, or None if it is not a gateway's."""
    client, _, host = member.partition("@")
    if not client.startswith(_PREFIX):
        return None
    mode, _, gateway = client[len(_PREFIX) :].partition("/")
    if not mode or not gateway:
        return None
    return Member(mode, gateway, host)


class GatewayPresence:
    """This gateway's membership in `PRESENCE_GROUP`, from `start` until `close`."""

    def __init__(self, bootstrap: str, mode: str, gateway: str) -> None:
        self._consumer = Consumer(
            {
                **connection(bootstrap),
                "group.id": PRESENCE_GROUP,
                "client.id": client_id(mode, gateway),
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 3,
                "logger": LIBRDKAFKA,
            }
        )
        self._joined = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kqs-presence", daemon=True)

    def start(self) -> None:
        self._consumer.subscribe([CATALOG_TOPIC], on_assign=self._on_assign)
        self._thread.start()

    def joined(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until this gateway is a member: true once it is."""
        return self._joined.wait(timeout_s)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            consumer.pause(partitions)  # a member only: nothing is ever read
        self._joined.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._consumer.poll(1.0)
            except KafkaException as error:  # the thread must outlive a broker's absence
                log.warning("presence poll failed", extra={"error": str(error)})
                self._stopping.wait(1.0)

    def close(self) -> None:
        """Leave the group at once (the other gateways see it gone without a timeout)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._consumer.close()
