"""Kafka-native readers of an encrypted queue, in Java and Python: the same records opened.

A gateway with a master key file seals an encrypted queue's bodies and attributes (sent
through both protocols with boto3). The Kafka Java consumer with
`kqs.encryption.KqsDecryptingDeserializer` (tests/clients/java, built once into the KQS cache)
reads the queue's topic and a clear queue's (`SqsManagedSseEnabled=false`) in one JVM run and
prints each record; the Python `RecordOpener` reads the same topic. Both give back exactly
what was sent, and the clear queue's record passes through untouched.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.support.clients_support import java_classpath, json_lines, require_tool
from tests.support.group_mode import topic_of
from tests.support.harness import GatewayProcess, client_for
from topology.encryption.keys import create_master_key_file, key_id_of
from topology.encryption.reader import RecordOpener


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "master.key"
    create_master_key_file(path)
    return path


@pytest.fixture(scope="module")
def keyed_gateway(
    kafka_bootstrap: str, key_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway with a master key (the session's has none), as `kqs serve` has one."""
    process = GatewayProcess(
        tmp_path_factory.mktemp("keyed") / "gateway",
        kafka_bootstrap,
        env={"KQS_MASTER_KEY_FILE": str(key_file)},
    )
    process.start()
    yield process
    process.stop()


def _attributes(i: int) -> dict[str, Any]:
    return {
        "kind": {"DataType": "String", "StringValue": f"order ✓ {i}"},
        "count": {"DataType": "Number", "StringValue": str(40 + i)},
        "blob": {"DataType": "Binary", "BinaryValue": bytes([0, i, 255])},
    }


def _as_stored(attributes: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Attributes as KQS seals them: binary values in base64."""
    out = {}
    for name, value in attributes.items():
        if "BinaryValue" in value:
            encoded = base64.b64encode(value["BinaryValue"]).decode()
            out[name] = {"DataType": value["DataType"], "BinaryValue": encoded}
        else:
            out[name] = dict(value)
    return out


Opened = tuple[bytes | None, dict[str, dict[str, str]]]


def _python_read(bootstrap: str, topic: str, opener: RecordOpener, count: int) -> list[Opened]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"py-{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        opened: list[Opened] = []
        while len(opened) < count:
            msg = consumer.poll(10)
            assert msg is not None, f"{len(opened)} of {count} records in {topic}"
            assert msg.error() is None, msg.error()
            headers = msg.headers()
            opened.append((opener.body(msg.value(), headers), opener.attributes(headers)))
        return opened
    finally:
        consumer.close()


def test_java_and_python_readers_open_an_encrypted_queue_and_pass_a_clear_one(
    keyed_gateway: GatewayProcess, kafka_bootstrap: str, key_file: Path, tmp_path: Path
) -> None:
    # Given: an encrypted queue (the default) and a clear one, with messages sent through
    # both protocols, each with String, Number and Binary attributes
    tools = require_tool("java", "mvn")
    classpath = java_classpath()
    sent: dict[str, dict[str, Any]] = {}
    urls = []
    for protocol, sse in (("json", "true"), ("query", "false")):
        sqs = client_for(protocol, keyed_gateway.endpoint)
        name = f"jdec-{uuid.uuid4().hex[:10]}"
        urls.append(sqs.create_queue(QueueName=name)["QueueUrl"])
        # The clear queue is made encrypted, then turned off, as a reader's queue would be.
        if sse == "false":
            sqs.set_queue_attributes(QueueUrl=urls[-1], Attributes={"SqsManagedSseEnabled": sse})
    encrypted_url, clear_url = urls
    for i, protocol in enumerate(("json", "query", "json", "query")):
        body = f"sealed body {i} ✓ {uuid.uuid4().hex}"
        client_for(protocol, keyed_gateway.endpoint).send_message(
            QueueUrl=encrypted_url, MessageBody=body, MessageAttributes=_attributes(i)
        )
        sent[body] = _as_stored(_attributes(i))
    clear_body = f"clear body {uuid.uuid4().hex}"
    client_for("query", keyed_gateway.endpoint).send_message(
        QueueUrl=clear_url,
        MessageBody=clear_body,
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "plain"}},
    )
    encrypted_topic = topic_of(kafka_bootstrap, encrypted_url.rsplit("/", 1)[1])
    clear_topic = topic_of(kafka_bootstrap, clear_url.rsplit("/", 1)[1])
    other_key_file = tmp_path / "other.key"
    create_master_key_file(other_key_file)

    # When: the Java consumer with the deserializer reads both topics (one JVM run)
    proc = subprocess.run(
        [
            tools["java"],
            "-cp",
            classpath,
            "kqs.clients.KafkaReader",
            kafka_bootstrap,
            str(key_file),
            str(other_key_file),
            str(len(sent) + 1),
            encrypted_topic,
            clear_topic,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    records = json_lines(proc.stdout, "RECORD ")

    # Then: Java opened every sealed body and its attributes as they were sent
    sealed = [r for r in records if r["topic"] == encrypted_topic]
    assert all(r["encrypted"] and r["clear_attributes"] == {} for r in sealed)
    assert {r["body"]: json.loads(r["attributes_json"]) for r in sealed} == sent
    # And: the clear queue's record passed through as it is, attributes in its headers
    (clear,) = [r for r in records if r["topic"] == clear_topic]
    assert (clear["encrypted"], clear["body"], clear["attributes_json"]) == (
        False,
        clear_body,
        None,
    )
    assert json.loads(clear["clear_attributes"]["kind"]) == {
        "DataType": "String",
        "StringValue": "plain",
    }
    # And: a reader with another deployment's master key is refused, naming the key id
    (refused,) = [
        json.loads(line.removeprefix("REFUSED "))
        for line in proc.stdout.splitlines()
        if line.startswith("REFUSED ")
    ]
    key_id = key_id_of(base64.b64decode(key_file.read_text().splitlines()[-1]))
    assert refused == {
        "error": "KqsEnvelopeException",
        "message": f"no master key {key_id} to open this envelope",
    }
    # And: the Python reader opens the same records to the same bodies and attributes
    opener = RecordOpener.from_master_key_file(key_file)
    opened = _python_read(kafka_bootstrap, encrypted_topic, opener, len(sent))
    assert {(body or b"").decode(): attributes for body, attributes in opened} == sent
    (clear_py,) = _python_read(kafka_bootstrap, clear_topic, opener, 1)
    assert clear_py == (clear_body.encode(), {})
