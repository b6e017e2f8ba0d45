"""HTTPS on the gateway (`kqs serve --tls-cert --tls-key`), behind both HTTP fronts, with a
plain HTTP port beside it: boto3 in both protocols, the AWS CLI with `--ca-bundle`, a
presigned URL; queue URLs take the scheme and host the client used, and a receipt handle
received over one is good over the other. (The Java SDK and Node: tests/clients/.)"""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import SSLError

from tests.support.aws_cli import AWS, run_aws
from tests.support.certificates import CertificateAuthority, https_gateway
from tests.support.harness import GatewayProcess, client_for


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("https-ca"))


@pytest.fixture(scope="module")
def gateway(
    ca: CertificateAuthority, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = https_gateway(ca, kafka_bootstrap, tmp_path_factory.mktemp("https"), "lean")
    process.start()
    yield process
    process.stop()


def _plain_endpoint(gateway: GatewayProcess) -> str:
    port = gateway.extra_args[gateway.extra_args.index("--http-port") + 1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_boto3_over_https_and_a_receipt_handle_good_over_plain_http(
    gateway: GatewayProcess, ca: CertificateAuthority, protocol: str
) -> None:
    os.environ["AWS_CA_BUNDLE"] = str(ca.cert)  # boto3's `verify=`, for both clients below
    try:
        secure = client_for(protocol, gateway.endpoint)
        plain = client_for(protocol, _plain_endpoint(gateway))
        # Given a queue created over HTTPS
        name = f"tls-{protocol}-{uuid.uuid4().hex[:6]}"
        url = secure.create_queue(QueueName=name)["QueueUrl"]
        # then its URL has the scheme and host the client used, on each port
        assert url == f"{gateway.endpoint}/000000000000/{name}"
        assert plain.get_queue_url(QueueName=name)["QueueUrl"] == (
            f"{_plain_endpoint(gateway)}/000000000000/{name}"
        )
        # and a message sent and received over HTTPS is deleted over plain HTTP
        secure.send_message(QueueUrl=url, MessageBody="über TLS")
        (message,) = secure.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        assert message["Body"] == "über TLS"
        plain.delete_message(
            QueueUrl=f"{_plain_endpoint(gateway)}/000000000000/{name}",
            ReceiptHandle=message["ReceiptHandle"],
        )
        attributes = secure.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        assert attributes["ApproximateNumberOfMessages"] == "0"
    finally:
        del os.environ["AWS_CA_BUNDLE"]


def test_a_client_that_does_not_trust_the_certificate_is_refused(gateway: GatewayProcess) -> None:
    with pytest.raises(SSLError):
        client_for("json", gateway.endpoint).list_queues()


def test_a_presigned_url_over_https(gateway: GatewayProcess, ca: CertificateAuthority) -> None:
    sqs = client_for("query", gateway.endpoint)
    url = sqs.generate_presigned_url("list_queues", ExpiresIn=300, HttpMethod="GET")
    assert url.startswith(f"{gateway.endpoint}/?")
    context = ssl.create_default_context(cafile=ca.cert)
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        assert response.status == 200
        assert b"ListQueuesResponse" in response.read()


def test_the_aws_cli_with_ca_bundle(gateway: GatewayProcess, ca: CertificateAuthority) -> None:
    assert AWS.exists(), f"the AWS CLI is installed with the test extra; not found at {AWS}"

    def aws(*args: str) -> object:
        done = run_aws(gateway.endpoint, "--ca-bundle", str(ca.cert), "sqs", *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    name = f"cli-tls-{uuid.uuid4().hex[:6]}"
    created = aws("create-queue", "--queue-name", name)
    assert isinstance(created, dict)
    url = created["QueueUrl"]
    assert url == f"{gateway.endpoint}/000000000000/{name}"
    aws("send-message", "--queue-url", url, "--message-body", "via the CLI")
    received = aws("receive-message", "--queue-url", url, "--wait-time-seconds", "5")
    assert isinstance(received, dict)
    (message,) = received["Messages"]
    assert message["Body"] == "via the CLI"
    aws("delete-message", "--queue-url", url, "--receipt-handle", message["ReceiptHandle"])


def test_the_aiohttp_front_serves_https_too(
    ca: CertificateAuthority, kafka_bootstrap: str, tmp_path: Path
) -> None:
    gateway = https_gateway(ca, kafka_bootstrap, tmp_path / "gateway", "aiohttp")
    gateway.start()
    os.environ["AWS_CA_BUNDLE"] = str(ca.cert)
    try:
        sqs = client_for("json", gateway.endpoint)
        name = f"aiohttp-tls-{uuid.uuid4().hex[:6]}"
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        assert url == f"{gateway.endpoint}/000000000000/{name}"
        sqs.send_message(QueueUrl=url, MessageBody="through aiohttp")
        (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        assert message["Body"] == "through aiohttp"
    finally:
        del os.environ["AWS_CA_BUNDLE"]
        gateway.stop()
