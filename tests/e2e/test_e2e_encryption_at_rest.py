"""Encryption at rest, end to end: a queue that says it is encrypted has no body or attribute
in clear in the broker's files or the lease store's, while its messages round-trip through
both protocols with their MD5s, through dead-letter moves, move tasks, a restart and a
Kafka-native reader; a queue with SSE off keeps clear text for Kafka-native readers. The
gateway has a master key file (SQS-managed encryption) and AWS KMS (moto's server on
127.0.0.1) for `KmsMasterKeyId`s: a KMS queue's records name its KMS key, KMS's refusals
answer as SQS's, and no AWS secret reaches the log.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.support.attribute_md5 import attributes_md5
from tests.support.harness import LOG_DIRS, GatewayProcess, client_for, eventually
from tests.support.moto_kms import MotoKms, moto_kms
from tests.support.move_tasks import arn_of, redrive_to
from tests.support.replay import replay_client, wait_until_ended
from topology.encryption import envelope
from topology.encryption.keys import create_master_key_file
from topology.encryption.reader import RecordOpener
from topology.names import EVENTS_TOPIC, LEASES_TOPIC


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "master.key"
    create_master_key_file(path)
    return path


@pytest.fixture(scope="module")
def kms() -> Iterator[MotoKms]:
    with moto_kms() as server:
        yield server


@pytest.fixture(scope="module")
def kms_key(kms: MotoKms) -> str:
    """The gateway's KQS_KMS_KEY_ID, which `alias/aws/sqs` stands for."""
    return kms.new_key()


@pytest.fixture(scope="module")
def keyed_gateway(
    kafka_bootstrap: str,
    key_file: Path,
    kms: MotoKms,
    kms_key: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    """A gateway with a master key and a KMS (the session's has neither), for this module's
    queues."""
    process = GatewayProcess(
        tmp_path_factory.mktemp("keyed") / "gateway",
        kafka_bootstrap,
        env={"KQS_MASTER_KEY_FILE": str(key_file), **kms.environment(kms_key)},
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture
def sqs(keyed_gateway: GatewayProcess, protocol: str) -> Any:
    return client_for(protocol, keyed_gateway.endpoint)


def _new_queue(sqs: Any, prefix: str, **attributes: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url


def _attributes(marker: str) -> dict[str, Any]:
    return {
        "note": {"DataType": "String", "StringValue": f"{marker} in an attribute"},
        "blob": {"DataType": "Binary", "BinaryValue": f"{marker} binary".encode()},
    }


def _send(sqs: Any, url: str, marker: str, count: int) -> dict[str, str]:
    """Send `count` messages with `marker` in body and attributes (one by one and in a batch);
    returns their bodies by message id, checking the MD5s the sends answered."""
    sent: dict[str, str] = {}
    attributes = _attributes(marker)
    for i in range(count // 2):
        body = f"{marker} body {i}"
        answer = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
        assert answer["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
        assert answer["MD5OfMessageAttributes"] == attributes_md5(attributes)
        sent[answer["MessageId"]] = body
    entries: list[dict[str, Any]] = [
        {"Id": str(i), "MessageBody": f"{marker} batch {i}", "MessageAttributes": attributes}
        for i in range(count - count // 2)
    ]
    answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert not answer.get("Failed")
    for ok in answer["Successful"]:
        sent[ok["MessageId"]] = entries[int(ok["Id"])]["MessageBody"]
    return sent


def _receive_all(sqs: Any, url: str, expected: int, delete: bool = False) -> dict[str, Any]:
    """Receive until `expected` messages came: each by id, with its body and attributes
    checked against the MD5s the receive answered."""
    got: dict[str, Any] = {}
    deadline = time.monotonic() + 20
    while len(got) < expected and time.monotonic() < deadline:
        response = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
            VisibilityTimeout=30,
        )
        for message in response.get("Messages", []):
            assert message["MD5OfBody"] == hashlib.md5(message["Body"].encode()).hexdigest()
            assert message["MD5OfMessageAttributes"] == attributes_md5(message["MessageAttributes"])
            got[message["MessageId"]] = message
            if delete:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert len(got) == expected, got.keys()
    return got


def _files_with(directories: list[Path], needle: bytes) -> list[Path]:
    found = []
    for directory in directories:
        for root, _, names in os.walk(directory):
            for name in names:
                path = Path(root) / name
                try:
                    if needle in path.read_bytes():
                        found.append(path)
                except FileNotFoundError:
                    continue  # a segment or an SST file removed while we walked
    return found


def _broker_dirs(bootstrap: str, *queue_urls: str) -> list[Path]:
    """The broker's partition directories of these queues, the lease changelog and the
    events topic."""
    assert bootstrap in LOG_DIRS, (
        "the test reads the jar broker's files (KQS_KAFKA_BOOTSTRAP unset)"
    )
    names = [f".{url.rsplit('/', 1)[1]}." for url in queue_urls]
    return [
        d
        for d in LOG_DIRS[bootstrap].iterdir()
        if any(n in d.name for n in names) or d.name.startswith((LEASES_TOPIC, EVENTS_TOPIC))
    ]


def _topic_of(bootstrap: str, url: str) -> str:
    (directory,) = [
        d for d in LOG_DIRS[bootstrap].iterdir() if f".{url.rsplit('/', 1)[1]}." in d.name
    ]
    return directory.name.rsplit("-", 1)[0]


def test_an_encrypted_queue_keeps_bodies_and_attributes_out_of_every_file_at_rest(
    sqs: Any, keyed_gateway: GatewayProcess, kafka_bootstrap: str
) -> None:
    # Given: a queue with SQS-managed encryption (the default) and an encrypted DLQ
    dlq = _new_queue(sqs, "sse-dlq")
    url = _new_queue(sqs, "sse", RedrivePolicy=redrive_to(dlq))
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["SqsManagedSseEnabled"] == "true"
    marker = f"marker-{uuid.uuid4().hex}"
    # When: messages are sent, held past their first second (then the lease store writes
    # them), received; one goes to the DLQ and is moved back by a move task
    sent = _send(sqs, url, marker, 10)
    time.sleep(1.5)
    received = _receive_all(sqs, url, 10)
    one = next(iter(received.values()))
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=one["ReceiptHandle"], VisibilityTimeout=0
    )
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    (in_dlq,) = _receive_all(sqs, dlq, 1, delete=True).values()
    # Then: every message came back whole, through the DLQ too
    assert {mid: m["Body"] for mid, m in received.items()} == sent
    for message in received.values():
        assert message["MessageAttributes"]["note"]["StringValue"] == f"{marker} in an attribute"
        assert message["MessageAttributes"]["blob"]["BinaryValue"] == f"{marker} binary".encode()
    assert in_dlq["Body"] == one["Body"] and in_dlq["MessageId"] == one["MessageId"]
    # And: the message ids are in the files (so the files were searched where messages are)
    # while the marker is nowhere: queue topic, DLQ topic, changelog, events, lease store
    some_id = next(iter(sent)).encode()
    broker_dirs = _broker_dirs(kafka_bootstrap, url, dlq)
    lease_dir = [keyed_gateway.data_dir / "leases"]
    eventually(lambda: _files_with(broker_dirs, some_id) or None, "the id in a segment", 10)
    eventually(lambda: _files_with(lease_dir, some_id) or None, "the id in the lease store", 10)
    assert _files_with(broker_dirs, marker.encode()) == []
    assert _files_with(lease_dir, marker.encode()) == []
    assert _files_with(broker_dirs, base64.b64encode(f"{marker} binary".encode())) == []


def test_a_queue_with_sse_off_keeps_clear_text_for_kafka_native_readers(
    sqs: Any, kafka_bootstrap: str
) -> None:
    # Given
    url = _new_queue(sqs, "clear", SqsManagedSseEnabled="false")
    assert (
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["SqsManagedSseEnabled"])[
            "Attributes"
        ]["SqsManagedSseEnabled"]
        == "false"
    )
    marker = f"marker-{uuid.uuid4().hex}"
    # When
    sent = _send(sqs, url, marker, 2)
    received = _receive_all(sqs, url, 2, delete=True)
    # Then
    assert {mid: m["Body"] for mid, m in received.items()} == sent
    found = eventually(
        lambda: _files_with(_broker_dirs(kafka_bootstrap, url), marker.encode()) or None,
        "the clear body in the queue's segment",
        10,
    )
    assert found


def test_a_kafka_native_reader_with_the_master_key_reads_an_encrypted_queue(
    sqs: Any, kafka_bootstrap: str, key_file: Path
) -> None:
    # Given
    url = _new_queue(sqs, "native")
    marker = f"marker-{uuid.uuid4().hex}"
    sent = _send(sqs, url, marker, 4)
    opener = RecordOpener.from_master_key_file(key_file)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(_topic_of(kafka_bootstrap, url), 0, OFFSET_BEGINNING)])
    # When
    bodies: list[bytes] = []
    raw_values: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(bodies) < 4 and time.monotonic() < deadline:
            record = consumer.poll(1.0)
            if record is None or record.error():
                continue
            value = record.value()
            assert isinstance(value, bytes)
            raw_values.append(value)
            body = opener.body(value, record.headers())
            assert body is not None
            bodies.append(body)
            assert opener.attributes(record.headers())["note"]["StringValue"] == (
                f"{marker} in an attribute"
            )
    finally:
        consumer.close()
    # Then
    assert sorted(b.decode() for b in bodies) == sorted(sent.values())
    assert all(marker.encode() not in value for value in raw_values)


def test_a_kms_queue_still_lists_its_reuse_period_at_the_default(sqs: Any) -> None:
    # Issue 54 item 9's other half: without a key the default period is not listed (AWS shows
    # none), but a queue with a KmsMasterKeyId lists it even at its default.
    url = _new_queue(sqs, "kms", KmsMasterKeyId="alias/aws/sqs", SqsManagedSseEnabled="false")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsDataKeyReusePeriodSeconds": "300"})
    names = ["KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert attributes == {
        "KmsMasterKeyId": "alias/aws/sqs",
        "KmsDataKeyReusePeriodSeconds": "300",
    }


def test_after_a_restart_the_gateway_opens_what_it_sealed_before(
    keyed_gateway: GatewayProcess, protocol: str
) -> None:
    # Given: messages sent, then the gateway restarted
    sqs = client_for(protocol, keyed_gateway.endpoint)
    url = _new_queue(sqs, "restart", KmsMasterKeyId="alias/aws/sqs")
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # As LocalStack's AWS-recorded snapshot test_sse_queue_attributes: the key, the reuse
    # period and SqsManagedSseEnabled false.
    assert attributes["KmsMasterKeyId"] == "alias/aws/sqs"
    assert attributes["KmsDataKeyReusePeriodSeconds"] == "300"
    assert attributes["SqsManagedSseEnabled"] == "false"
    marker = f"marker-{uuid.uuid4().hex}"
    sent = _send(sqs, url, marker, 2)
    keyed_gateway.stop()
    # When
    keyed_gateway.start()
    # Then
    received = _receive_all(sqs, url, 2, delete=True)
    assert {mid: m["Body"] for mid, m in received.items()} == sent


def test_move_tasks_reseal_for_an_encrypted_destination_and_open_for_one_in_clear(
    sqs: Any,
) -> None:
    # Given: an encrypted source whose messages went to a DLQ in clear
    dlq = _new_queue(sqs, "clear-dlq", SqsManagedSseEnabled="false")
    url = _new_queue(sqs, "sealed-src", RedrivePolicy=redrive_to(dlq))
    marker = f"marker-{uuid.uuid4().hex}"
    sent = _send(sqs, url, marker, 2)
    for message in _receive_all(sqs, url, 2).values():
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    # The next receive is past maxReceiveCount 1: both go to the DLQ
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    in_dlq = _receive_all(sqs, dlq, 2)
    assert {m["Body"] for m in in_dlq.values()} == set(sent.values())
    for message in in_dlq.values():
        sqs.change_message_visibility(
            QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    # When: a move task takes them back to the encrypted source
    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    # Then
    back = _receive_all(sqs, url, 2, delete=True)
    assert {m["Body"] for m in back.values()} == set(sent.values())


def test_replay_and_peek_open_an_encrypted_queues_logged_records(
    keyed_gateway: GatewayProcess, protocol: str
) -> None:
    # Given: an encrypted queue whose messages were received and deleted
    kqs = replay_client(protocol, keyed_gateway.endpoint)
    url = _new_queue(kqs, "replay")
    since_ms = int(time.time() * 1000) - 1000
    marker = f"marker-{uuid.uuid4().hex}"
    sent = _send(kqs, url, marker, 2)
    _receive_all(kqs, url, 2, delete=True)
    # When: they are replayed from the log, and the queue is browsed
    kqs.start_message_replay_task(QueueUrl=url, SinceTimestamp=since_ms)
    assert wait_until_ended(kqs, url)["Status"] == "COMPLETED"
    peeked = kqs.peek_messages(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    # Then: both show the bodies in clear, with their MD5s
    back = _receive_all(kqs, url, 2, delete=True)
    assert sorted(m["Body"] for m in back.values()) == sorted(sent.values())
    assert {m["Body"] for m in peeked} >= set(sent.values())
    for message in peeked:
        assert message["MD5OfBody"] == hashlib.md5(message["Body"].encode()).hexdigest()


def _records(bootstrap: str, url: str, count: int) -> list[Any]:
    """The first `count` records of the queue's topic (partition 0), as Kafka has them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(_topic_of(bootstrap, url), 0, OFFSET_BEGINNING)])
    records: list[Any] = []
    try:
        deadline = time.monotonic() + 20
        while len(records) < count and time.monotonic() < deadline:
            record = consumer.poll(1.0)
            if record is not None and not record.error():
                records.append(record)
    finally:
        consumer.close()
    assert len(records) == count
    return records


def test_a_kms_queue_is_sealed_under_its_own_kms_key_and_says_so(
    sqs: Any,
    kms: MotoKms,
    keyed_gateway: GatewayProcess,
    kafka_bootstrap: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a queue whose KmsMasterKeyId is a key of the KMS
    own_key = kms.new_key()
    url = _new_queue(sqs, "own-kms", KmsMasterKeyId=own_key)
    marker = f"marker-{uuid.uuid4().hex}"
    # When messages are sent and received
    sent = _send(sqs, url, marker, 2)
    received = _receive_all(sqs, url, 2, delete=True)
    # Then they round-trip, the queue reports its key, and every record's envelopes name
    # that KMS key (its data key came from KMS's GenerateDataKey under it)
    assert {mid: m["Body"] for mid, m in received.items()} == sent
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["KmsMasterKeyId"] == own_key
    assert attributes["SqsManagedSseEnabled"] == "false"
    records = _records(kafka_bootstrap, url, 2)
    for record in records:
        assert marker.encode() not in record.value()
        assert envelope.parse(record.value())[1] == f"kms:{own_key}"
    # and a Kafka-native reader with KMS access opens them
    for name, value in kms.environment(own_key).items():
        monkeypatch.setenv(name, value)
    opener = RecordOpener.from_kms()
    bodies = {opener.body(r.value(), r.headers()) for r in records}
    assert bodies == {body.encode() for body in sent.values()}
    # and the gateway's AWS secret is not in its log
    assert kms.secret_key not in keyed_gateway.log_path.read_text()


def test_a_kms_key_kms_does_not_know_refuses_the_send_as_sqs_does(sqs: Any) -> None:
    # Given a queue whose KmsMasterKeyId names no key of the KMS (accepted when set, as SQS
    # does: the key is used at the first send)
    url = _new_queue(sqs, "missing-kms", KmsMasterKeyId="alias/no-such-key")
    # When a message is sent, then KMS's refusal is the answer, as SQS gives it
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.send_message(QueueUrl=url, MessageBody="never stored")
    error = refused.value.response["Error"]
    assert error["Code"] in ("KmsNotFound", "KMS.NotFoundException")
    assert "NotFoundException" in error["Message"] and "alias/no-such-key" in error["Message"]
