"""Both HTTP fronts (`KQS_HTTP_FRONT`): the same gateway behind each answers alike.

The rest of the suite runs on the default front; here one gateway per front takes a message
round trip in both protocols, an error, the body limit, `/health` and `/metrics`, and stops
cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from gateway.common import limits
from tests.support.harness import GatewayProcess, client_for, signed_headers


@pytest.mark.parametrize("front", ["lean", "aiohttp"])
def test_each_front_serves_both_protocols_errors_the_limit_health_and_metrics(
    front: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path / "gateway", kafka_bootstrap, env={"KQS_HTTP_FRONT": front})
    gateway.start()
    try:
        # Given a gateway behind this front, when each protocol sends, receives and deletes
        for protocol in ("json", "query"):
            sqs = client_for(protocol, gateway.endpoint)
            url = sqs.create_queue(QueueName=f"front-{uuid.uuid4().hex[:8]}")["QueueUrl"]
            sent = sqs.send_message(QueueUrl=url, MessageBody=f"through {front} ü")
            (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
            # then the message comes back whole, with its checksum
            assert message["Body"] == f"through {front} ü"
            assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            # and an SQS error keeps its code
            with pytest.raises(sqs.exceptions.QueueDoesNotExist):
                sqs.get_queue_url(QueueName=f"missing-{uuid.uuid4().hex[:8]}")
        # And a body over the limit is 413 RequestEntityTooLarge naming the limit
        body = b"Action=SendMessage&MessageBody=" + b"x" * (limits.MAX_REQUEST_BYTES + 1)
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        request = urllib.request.Request(
            gateway.endpoint,
            data=body,
            headers=signed_headers(gateway.endpoint, body, headers),
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as excinfo:
            urllib.request.urlopen(request, timeout=30)
        assert excinfo.value.code == 413
        assert str(limits.MAX_REQUEST_BYTES) in excinfo.value.read().decode()
        # And /health and /metrics answer
        with urllib.request.urlopen(f"{gateway.endpoint}/health", timeout=5) as response:
            assert json.load(response) == {"status": "ok"}
        with urllib.request.urlopen(f"{gateway.endpoint}/metrics", timeout=5) as response:
            assert "kqs_requests_total" in response.read().decode()
        # And the gateway says which front it runs, and stops cleanly on SIGTERM
        assert (f'"front": "{front}"' in gateway.log_path.read_text()) == (front == "lean")
        assert gateway.terminate() == 0
    finally:
        gateway.stop()
