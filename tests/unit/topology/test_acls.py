"""The Kafka ACLs docs/GUIDE.md lists are the grants `topology/acls.py` holds (which the SASL_SSL test
grants, and nothing more: tests/e2e/test_e2e_kafka_security.py)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from gateway.common.denials import missing_acl
from topology import acls
from topology.producer import ProduceFailed

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "GUIDE.md"


def test_the_guide_lists_exactly_the_grants_kqs_needs() -> None:
    lines = {line for line in GUIDE.read_text().splitlines() if line.startswith("kafka-acls.sh")}
    expected = {g.command("User:kqs-gateway") for g in acls.GATEWAY} | {
        g.command("User:kqs-analytics") for g in acls.ANALYTICS
    }
    assert lines == expected


def test_a_refusal_names_the_grant_the_action_needs() -> None:
    refused = ProduceFailed(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert missing_acl(refused, "SendMessage") == "WRITE on topics prefixed 'kqs.'"
    group = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    assert missing_acl(group, "ReceiveMessage") == "READ and DESCRIBE on groups prefixed 'kqs-'"
    # anything else is not a refusal
    assert missing_acl(ProduceFailed(KafkaError(KafkaError._MSG_TIMED_OUT)), "SendMessage") is None
