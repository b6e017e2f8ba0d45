"""Java SQS clients against `kqs serve` on a real broker: AWS SDK v2, JMS, Extended Client.

tests/clients/java is a small Maven module (built once into the KQS cache, see
`tests/support/clients_support.py`) whose `kqs.clients.Main` runs every scenario in one JVM and prints
what each observed as one JSON line. Each test below asserts on one scenario's observations and
then checks the queue (and the S3 bucket) independently with boto3.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import uuid
from typing import Any

import pytest

from tests.support.attribute_md5 import attributes_md5
from tests.support.clients_support import (
    bucket_keys,
    java_classpath,
    json_lines,
    new_bucket,
    require_tool,
)
from tests.support.harness import GatewayProcess, json_client

SCENARIOS = ("sdk-sync", "sdk-async-batch", "jms", "extended")
EMPTY = {
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
}


def large_body() -> str:
    """The Extended Client scenario's 2 MiB body (`ExtendedScenario.largeBody`)."""
    size = 2 * 1024 * 1024
    return "".join(f"{i:08d}|" for i in range(size // 9 + 1))[:size]


class JavaRun:
    def __init__(self, results: dict[str, dict[str, Any]], bucket: str, output: str) -> None:
        self.results = results
        self.bucket = bucket
        self.output = output

    def scenario(self, name: str) -> dict[str, Any]:
        result = self.results.get(name)
        assert result is not None, f"scenario {name} printed no result:\n{self.output[-4000:]}"
        assert "error" not in result, result["error"]
        return result


@pytest.fixture(scope="module")
def java_run(gateway: GatewayProcess, request: pytest.FixtureRequest) -> JavaRun:
    """All Java scenarios, in one JVM launch.

    Without the S3 server (no Go toolchain outside CI: it skips), the Extended Client
    scenario is left out and its test skips on its own; the others still run.
    """
    tools = require_tool("java", "mvn")
    classpath = java_classpath()
    scenarios = list(SCENARIOS)
    try:
        s3_endpoint: str = request.getfixturevalue("s3_endpoint")
        bucket = new_bucket(s3_endpoint, "kqs-java")
    except pytest.skip.Exception:
        scenarios.remove("extended")
        s3_endpoint, bucket = "http://127.0.0.1:1", "none"
    prefix = f"jv-{uuid.uuid4().hex[:10]}"
    proc = subprocess.run(
        [
            tools["java"],
            "-cp",
            classpath,
            "kqs.clients.Main",
            gateway.endpoint,
            prefix,
            s3_endpoint,
            bucket,
            *scenarios,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    results = {result["scenario"]: result for result in json_lines(proc.stdout, "RESULT ")}
    return JavaRun(results, bucket, output)


def assert_empty(gateway: GatewayProcess, *urls: str) -> None:
    sqs = json_client(gateway.endpoint)
    for url in urls:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(EMPTY))
        assert attributes["Attributes"] == EMPTY, url
        assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []


def test_sdk_v2_sync_client_round_trip(java_run: JavaRun, gateway: GatewayProcess) -> None:
    result = java_run.scenario("sdk-sync")
    body = "héllo from the Java SDK v2 ✓"
    assert result["sent_md5_body"] == hashlib.md5(body.encode()).hexdigest()
    assert result["sent_md5_body"] == result["expected_md5_body"]
    sent_attributes: dict[str, dict[str, Any]] = {
        "kind": {"DataType": "String", "StringValue": "order"},
        "count": {"DataType": "Number", "StringValue": "42"},
        "blob": {"DataType": "Binary", "BinaryValue": bytes([0, 1, 2, 255])},
        "price": {"DataType": "Number.float", "StringValue": "9.99"},
    }
    assert result["sent_md5_attributes"] == attributes_md5(sent_attributes)

    [first] = result["first_receive"]
    assert first["id"] == result["sent_id"]
    assert first["body"] == body
    assert first["md5_body"] == result["sent_md5_body"]
    assert first["md5_attributes"] == result["sent_md5_attributes"]
    assert first["attributes"] == {
        "blob": {"type": "Binary", "value": base64.b64encode(bytes([0, 1, 2, 255])).decode()},
        "count": {"type": "Number", "value": "42"},
        "kind": {"type": "String", "value": "order"},
        "price": {"type": "Number.float", "value": "9.99"},
    }
    system = first["system"]
    assert system["ApproximateReceiveCount"] == "1"
    assert system["AWSTraceHeader"] == "Root=1-5759e988-bd862e3fe1be46a994272793"
    assert int(system["SentTimestamp"]) > 0
    assert system["SenderId"]

    [second] = result["second_receive"]
    assert second["id"] == result["sent_id"]
    assert second["body"] == body
    assert second["attributes"] == {"kind": {"type": "String", "value": "order"}}
    assert second["system"] == {"ApproximateReceiveCount": "2"}

    assert (result["batch_sent"], result["batch_failed"]) == (10, 0)
    assert result["batch_received"] == 10
    assert result["batch_index_by_body"] == {f"batch-{i}": str(i) for i in range(10)}
    assert (result["batch_deleted"], result["batch_delete_failed"]) == (10, 0)
    assert result["final_counts"] == EMPTY
    assert result["final_receive"] == 0
    assert_empty(gateway, result["queue_url"])


def test_sdk_v2_async_client_with_batch_manager(java_run: JavaRun, gateway: GatewayProcess) -> None:
    result = java_run.scenario("sdk-async-batch")
    assert result["sent_unique_ids"] == 300
    assert result["received_unique_bodies"] == 300
    assert result["bodies_equal_sent"] is True
    assert result["attribute_mismatches"] == 0
    assert result["received"] == 300  # nothing delivered twice
    assert result["deleted"] == 300
    operations = result["operations"]
    # The batch manager turned 300 sends and 300 deletes into batches of up to 10.
    assert operations.get("SendMessage", 0) == 0
    assert operations.get("DeleteMessage", 0) == 0
    assert 30 <= operations["SendMessageBatch"] < 300
    assert 30 <= operations["DeleteMessageBatch"] < 300
    assert operations["ReceiveMessage"] >= 30
    assert result["final_counts"] == EMPTY
    assert_empty(gateway, result["queue_url"])


def test_jms_library(java_run: JavaRun, gateway: GatewayProcess) -> None:
    result = java_run.scenario("jms")
    client_ack = result["client_acknowledge"]
    text, data, obj = client_ack["received"]
    assert text["jms_type"] == "SQSTextMessage"
    assert text["text"] == "jms text ✓"
    assert text["properties"] == {
        "boolProp": {"class": "Boolean", "value": "true"},
        "byteProp": {"class": "Byte", "value": "-3"},
        "doubleProp": {"class": "Double", "value": "2.5"},
        "floatProp": {"class": "Float", "value": "1.25"},
        "intProp": {"class": "Integer", "value": "42"},
        "longProp": {"class": "Long", "value": "9000000000"},
        "shortProp": {"class": "Short", "value": "7"},
        "strProp": {"class": "String", "value": "hello"},
    }
    assert data["jms_type"] == "SQSBytesMessage"
    assert data["bytes"] == list(range(256))
    assert data["properties"] == {"intProp": {"class": "Integer", "value": "-1"}}
    assert obj["jms_type"] == "SQSObjectMessage"
    assert obj["object_class"] == "java.util.ArrayList"
    assert obj["object"] == "[a, 1, 2.5, {k=v}]"
    assert obj["properties"] == {"strProp": {"class": "String", "value": "object"}}
    assert all(m["redelivered"] is False and m["message_id_prefix"] for m in (text, data, obj))
    # CLIENT_ACKNOWLEDGE: three in flight until the last one is acknowledged, then none.
    assert client_ack["counts_before_ack"]["ApproximateNumberOfMessagesNotVisible"] == "3"
    assert client_ack["counts_after_ack"] == EMPTY

    unordered = result["unordered_acknowledge"]
    assert unordered["received_seqs"] == [0, 1, 2, 3, 4]
    # UNORDERED_ACKNOWLEDGE: acknowledging 0, 2 and 4 leaves exactly 1 and 3 in flight.
    assert unordered["counts_after_even_acks"] == {
        **EMPTY,
        "ApproximateNumberOfMessagesNotVisible": "2",
    }
    assert unordered["counts_after_all_acks"] == EMPTY

    listener = result["listener"]
    assert listener["all_arrived"] is True
    assert listener["received"] == sorted(f"listened-{i}#{i}" for i in range(20))

    assert result["final_counts"] == [EMPTY, EMPTY, EMPTY]
    assert_empty(gateway, *result["queue_urls"])


def test_extended_client_with_s3(
    java_run: JavaRun, gateway: GatewayProcess, s3_endpoint: str
) -> None:
    result = java_run.scenario("extended")
    body = large_body()
    digest = hashlib.sha256(body.encode()).hexdigest()
    assert result["sent_large_sha256"] == digest
    # The 2 MiB body went to S3 as one object; the small one stayed in the queue.
    [stored] = result["s3_keys_after_send"]
    key, size = stored.rsplit(":", 1)
    assert int(size) == len(body)
    raw_large = result["raw"]["large"]
    pointer = json.loads(raw_large["body_head"])
    assert pointer[0] == "software.amazon.payloadoffloading.PayloadS3Pointer"
    assert pointer[1] == {"s3BucketName": java_run.bucket, "s3Key": key}
    assert raw_large["attributes"] == {
        # The Java library's default (legacy) name; the Python one writes ExtendedPayloadSize.
        "SQSLargePayloadSize": f"Number:{len(body)}",
        "kind": "String:large",
    }
    assert result["raw"]["small"] == {
        "body_length": len("small body"),
        "body_head": "small body",
        "attributes": {"kind": "String:small"},
    }
    # The receiver gets the whole body back, and the library's own attribute is hidden.
    assert result["received"]["large"] == {
        "body_length": len(body),
        "body_sha256": digest,
        "attribute_names": ["kind"],
    }
    assert result["received"]["small"]["body"] == "small body"
    assert result["deleted"] == 2
    # Deleting the message removed its S3 object.
    assert result["s3_keys_after_delete"] == []
    assert bucket_keys(s3_endpoint, java_run.bucket) == []
    assert result["final_counts"] == EMPTY
    assert_empty(gateway, result["queue_url"])
