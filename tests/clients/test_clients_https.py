"""The Java SDK v2 and Node's SDK v3 against a gateway serving HTTPS (`kqs serve --tls-cert`),
trusting its CA the way each platform does: a Java truststore (made with keytool) and
`NODE_EXTRA_CA_CERTS`. The scenarios are the plain-HTTP tests' own (tests/clients/java,
tests/clients/node/roundtrip.cjs), pointed at the https:// endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.certificates import CertificateAuthority, https_gateway
from tests.support.clients_support import (
    CLIENTS,
    java_classpath,
    json_lines,
    node_modules,
    require_tool,
)
from tests.support.harness import GatewayProcess, client_for


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("clients-https-ca"))


@pytest.fixture(scope="module")
def gateway(
    ca: CertificateAuthority, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = https_gateway(ca, kafka_bootstrap, tmp_path_factory.mktemp("clients-https"))
    process.start()
    yield process
    process.stop()


def _assert_consumed(gateway: GatewayProcess, ca: CertificateAuthority, url: str) -> None:
    os.environ["AWS_CA_BUNDLE"] = str(ca.cert)
    try:
        attributes = client_for("json", gateway.endpoint).get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
    finally:
        del os.environ["AWS_CA_BUNDLE"]
    assert attributes["ApproximateNumberOfMessages"] == "0"


def test_java_sdk_v2_with_a_truststore(
    gateway: GatewayProcess, ca: CertificateAuthority, tmp_path: Path
) -> None:
    tools = require_tool("java", "mvn", "keytool")
    classpath = java_classpath()
    # Given a PKCS#12 truststore holding the gateway's CA, as keytool makes one
    truststore = tmp_path / "truststore.p12"
    subprocess.run(
        [tools["keytool"], "-importcert", "-noprompt", "-alias", "kqs-ca", "-file", str(ca.cert)]
        + ["-keystore", str(truststore), "-storetype", "PKCS12", "-storepass", "changeit"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    # when the sync client's scenario runs against the https:// endpoint
    proc = subprocess.run(
        [
            tools["java"],
            f"-Djavax.net.ssl.trustStore={truststore}",
            "-Djavax.net.ssl.trustStorePassword=changeit",
            "-Djavax.net.ssl.trustStoreType=PKCS12",
            "-cp",
            classpath,
            "kqs.clients.Main",
            gateway.endpoint,
            f"jv-tls-{uuid.uuid4().hex[:8]}",
            "http://127.0.0.1:1",
            "none",
            "sdk-sync",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (result,) = json_lines(proc.stdout, "RESULT ")
    # then it ran whole over HTTPS: its queue URL is the https one, its message consumed
    assert "error" not in result, result["error"]
    assert result["queue_url"].startswith(f"{gateway.endpoint}/000000000000/")
    assert result["sent_md5_body"] == result["expected_md5_body"]
    _assert_consumed(gateway, ca, result["queue_url"])


def test_node_sdk_v3_with_node_extra_ca_certs(
    gateway: GatewayProcess, ca: CertificateAuthority
) -> None:
    tools = require_tool("node", "npm")
    modules = node_modules()
    proc = subprocess.run(
        [
            tools["node"],
            str(CLIENTS / "node" / "roundtrip.cjs"),
            gateway.endpoint,
            f"node-tls-{uuid.uuid4().hex[:8]}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NODE_PATH": str(modules), "NODE_EXTRA_CA_CERTS": str(ca.cert)},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["queue_url"].startswith(f"{gateway.endpoint}/000000000000/")
    [message] = result["received"]
    assert message["body"] == "héllo from Node ✓"
    assert message["md5_body"] == result["sent_md5_body"] == result["expected_md5_body"]
    assert (result["batch_sent"], result["batch_failed"]) == (10, 0)
    _assert_consumed(gateway, ca, result["queue_url"])
