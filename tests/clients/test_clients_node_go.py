"""Node.js and Go SQS clients against `kqs serve` on a real broker.

* tests/clients/node/roundtrip.cjs: `@aws-sdk/client-sqs` v3 (send with String/Number/Binary
  attributes, receive, delete, batch send) and `sqs-consumer` draining the batch;
* tests/clients/go: the AWS SDK for Go v2 `service/sqs` (the same round trip, batch receive and
  DeleteMessageBatch);
* tests/clients/node/fifo.cjs and tests/clients/go/fifo.go: one FIFO flow in both (group order,
  deduplication, a batch, a batch refused whole, a group available again once one message's
  visibility ended).

Each program prints what it observed as JSON; the assertions are here, and the queue is then
checked independently with boto3. Dependencies are installed once into the KQS cache
(`tests/support/clients_support.py`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from typing import Any

from tests.support.attribute_md5 import attributes_md5
from tests.support.clients_support import CLIENTS, go_binary, node_modules, require_tool
from tests.support.harness import GatewayProcess, json_client

EMPTY = {
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
}
SENT_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "kind": {"DataType": "String", "StringValue": "order"},
    "count": {"DataType": "Number", "StringValue": "42"},
    "blob": {"DataType": "Binary", "BinaryValue": bytes([0, 1, 2, 255])},
}
OBSERVED_ATTRIBUTES = {
    "kind": {"type": "String", "value": "order"},
    "count": {"type": "Number", "value": "42"},
    "blob": {"type": "Binary", "value": base64.b64encode(bytes([0, 1, 2, 255])).decode()},
}


def run_json(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def check_single_round_trip(result: dict[str, Any], body: str) -> None:
    assert result["sent_md5_body"] == hashlib.md5(body.encode()).hexdigest()
    assert result["expected_md5_body"] == result["sent_md5_body"]
    assert result["sent_md5_attributes"] == attributes_md5(SENT_ATTRIBUTES)
    [message] = result["received"]
    assert message["id"] == result["sent_id"]
    assert message["body"] == body
    assert message["md5_body"] == result["sent_md5_body"]
    assert message["md5_attributes"] == result["sent_md5_attributes"]
    assert message["attributes"] == OBSERVED_ATTRIBUTES
    assert message["receive_count"] == "1"


def assert_empty(gateway: GatewayProcess, url: str) -> None:
    sqs = json_client(gateway.endpoint)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(EMPTY))
    assert attributes["Attributes"] == EMPTY
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []


def test_node_sdk_v3_and_sqs_consumer(gateway: GatewayProcess) -> None:
    tools = require_tool("node", "npm")
    modules = node_modules()
    result = run_json(
        [
            tools["node"],
            str(CLIENTS / "node" / "roundtrip.cjs"),
            gateway.endpoint,
            f"node-{uuid.uuid4().hex[:10]}",
        ],
        env={"NODE_PATH": str(modules)},
    )
    check_single_round_trip(result, "héllo from Node ✓")
    assert (result["batch_sent"], result["batch_failed"]) == (10, 0)
    # sqs-consumer handled each of the batch once, with its attribute, and deleted it.
    assert result["consumed"] == {f"batch-{i}": str(i) for i in range(10)}
    assert result["consumed_duplicates"] == 0
    assert result["final_counts"] == EMPTY
    assert_empty(gateway, result["queue_url"])


def test_go_sdk_v2(gateway: GatewayProcess) -> None:
    require_tool("go")
    binary = go_binary()
    result = run_json([str(binary), gateway.endpoint, f"go-{uuid.uuid4().hex[:10]}"])
    check_single_round_trip(result, "héllo from Go ✓")
    assert (result["batch_sent"], result["batch_failed"]) == (10, 0)
    assert result["batch_received"] == 10
    assert result["batch_index_by_body"] == {f"batch-{i}": str(i) for i in range(10)}
    assert (result["batch_deleted"], result["batch_delete_failed"]) == (10, 0)
    assert result["final_counts"] == EMPTY
    assert_empty(gateway, result["queue_url"])


# -- FIFO queues ----------------------------------------------------------------------------------


def check_fifo_flow(result: dict[str, Any]) -> None:
    """What tests/clients/node/fifo.cjs and tests/clients/go/fifo.go observed (the same flow)."""
    sent = result["sent"]
    # sequence numbers grow within a group; a repeated deduplication id answers the original
    assert int(sent["g1-m1"]["sequence"]) < int(sent["g1-m2"]["sequence"])
    assert result["duplicate"] == sent["g1-m1"]["id"]
    assert (result["batch_sent"], result["batch_failed"]) == ([["e0", True], ["e1", True]], 0)
    # a batch with an entry without MessageGroupId fails whole, as AWS answers it
    assert result["refused_batch"] == {
        "name": "InvalidParameterValue",
        "message": "The request must contain the parameter MessageGroupId.",
    }
    # groups in the order they became available, each whole, in order, with its attributes
    first = result["first_receive"]
    assert [m["body"] for m in first] == ["g1-m1", "g1-m2", "g2-m1", "g2-m2", "g3-m1"]
    assert all(m["group"] == m["body"][:2] and m["deduplication_id"] == m["body"] for m in first)
    assert first[0]["sequence"] == sent["g1-m1"]["sequence"]
    assert result["while_in_flight"] == []
    # g1-m1's visibility ended: it comes again, g1-m2 (still in flight) does not
    assert result["after_visibility_ended"] == ["g1-m1"]
    assert result["final_counts"] == EMPTY


def test_node_sdk_v3_fifo_queue(gateway: GatewayProcess) -> None:
    tools = require_tool("node", "npm")
    modules = node_modules()
    result = run_json(
        [
            tools["node"],
            str(CLIENTS / "node" / "fifo.cjs"),
            gateway.endpoint,
            f"node-fifo-{uuid.uuid4().hex[:10]}",
        ],
        env={"NODE_PATH": str(modules)},
    )
    check_fifo_flow(result)
    assert_empty(gateway, result["queue_url"])


def test_go_sdk_v2_fifo_queue(gateway: GatewayProcess) -> None:
    require_tool("go")
    binary = go_binary()
    result = run_json([str(binary), gateway.endpoint, f"go-fifo-{uuid.uuid4().hex[:10]}", "fifo"])
    check_fifo_flow(result)
    assert_empty(gateway, result["queue_url"])
