"""KQS on a Kafka cluster that refuses plaintext: one jar broker for the module with a SASL_SSL
listener, an mTLS listener and the StandardAuthorizer, SCRAM users created through the admin
API, and only the ACLs docs/GUIDE.md lists (`topology/acls.py`) granted.

- the whole message path through two gateways in group mode (sent through one, received
  and deleted through the other, which forwards to the first's partition), whose every Kafka
  client logs in with SCRAM from a Java-style `client.properties` (MSK's), and which serve
  HTTPS, each with its own certificate from one private CA, to clients and to each other
  (`--tls-peer-ca`), in both protocols; the secret in no log line, not in /metrics;
- a gateway whose principal lacks one documented ACL answers with an error naming it;
- each login KQS documents (PLAIN over TLS as Confluent Cloud gives it, SCRAM in librdkafka's
  dialect from `KQS_KAFKA_*`, mutual TLS, OAUTHBEARER with OIDC client credentials) reaches
  the cluster through `topology/client_properties.py`, as every client of KQS is made;
- `kqs analytics` (Spark's Kafka source and sink, the driver's admin client, the dashboard)
  runs over it as its own principal with only the analytics' ACLs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from lease_store.handles import ReceiptHandleCodec
from tests.support.group_mode import gateway_id, owners_of, topic_of
from tests.support.harness import GatewayProcess, client_for, eventually, free_port
from tests.support.secure_kafka import SecureKafka, secure_kafka, token_endpoint
from topology import acls, client_properties
from topology.admin import TopicAdmin

GATEWAY_USER = "kqs-gateway"
PLAIN_USER = "kqs-plain"
NO_WRITE_USER = "kqs-no-write"
ANALYTICS_USER = "kqs-analytics"
RECEIPT_SECRET = uuid.uuid4().hex


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    work = tmp_path_factory.mktemp("secure-kafka")
    with secure_kafka(
        work, plain_users={PLAIN_USER: uuid.uuid4().hex}, unsecured_oauthbearer=True
    ) as cluster:
        cluster.add_scram_user(GATEWAY_USER, "SCRAM-SHA-512")
        cluster.grant(f"User:{GATEWAY_USER}", acls.GATEWAY)
        yield cluster


@pytest.fixture(scope="module")
def gateways(
    kafka: SecureKafka, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    """Two gateways in group mode, sharing the queues' partitions, whose Kafka clients all log
    in as `kqs-gateway` (SCRAM-SHA-512) from the properties file MSK's documentation has
    users write, and which serve HTTPS with a certificate each, signed by a private CA (the
    broker's here) that each trusts for the other (`KQS_TLS_PEER_CA`)."""
    config = kafka.properties_file("msk-scram", kafka.scram_properties(GATEWAY_USER))
    env = {
        "KQS_KAFKA_CONFIG": str(config),
        "KQS_PARTITION_OWNERSHIP": "group",
        "KQS_RECEIPT_SECRET": RECEIPT_SECRET,
        "KQS_PARTITIONS": "2",
        "KQS_TLS_PEER_CA": str(kafka.ca.cert),
    }
    work = tmp_path_factory.mktemp("secure-gateways")
    pair = []
    for name in "ab":
        server = kafka.ca.pem(f"gateway-{name}", ("localhost", "127.0.0.1"), server=True)
        tls = {"KQS_TLS_CERT": str(server.cert), "KQS_TLS_KEY": str(server.key)}
        pair.append(
            GatewayProcess(work / name, kafka.bootstrap, env=env | tls, tls_ca=kafka.ca.cert)
        )
    try:
        for process in pair:
            process.start(timeout_s=90)
        yield pair
    finally:
        for process in pair:
            process.stop()


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_the_message_path_runs_over_sasl_ssl_with_only_the_documented_acls(
    gateways: list[GatewayProcess],
    kafka: SecureKafka,
    protocol: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", str(kafka.ca.cert))  # the clients' `verify=`
    sender, sqs = (client_for(protocol, g.endpoint) for g in gateways)
    # Given a queue of two partitions created through one of two gateways that may do only
    # what docs/GUIDE.md grants them, each serving one of its partitions
    name = f"secure-{protocol}"
    url = sender.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    topic = topic_of(kafka.bootstrap, name, kafka.super_user())
    ids = [gateway_id(g) for g in gateways]

    def one_partition_each() -> dict[int, Any] | None:
        owners = owners_of(kafka.bootstrap, topic, kafka.super_user())
        return owners if sorted(o.gateway for o in owners.values()) == sorted(ids) else None

    owners = eventually(one_partition_each, "each gateway serving a partition", 60)
    assert all(owner.endpoint.startswith("https://") for owner in owners.values())
    # when messages are sent through one, received through the other, made visible again,
    # received again and deleted
    sender.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)]
    )
    received: dict[str, Any] = {}

    def all_three() -> dict[str, Any] | None:
        for message in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", []):
            received[message["Body"]] = message
        return received if len(received) == 3 else None

    eventually(all_three, "the three messages", 30)
    # (sent into the partition the sender serves: the receiving gateway leased them, and
    # deletes them below, through the sender, over HTTPS)
    codec = ReceiptHandleCodec(RECEIPT_SECRET.encode())
    partitions = {codec.decode(m["ReceiptHandle"]).partition for m in received.values()}
    assert ids[0] in {owners[p].gateway for p in partitions}
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=received["m0"]["ReceiptHandle"], VisibilityTimeout=0
    )
    (again,) = eventually(
        lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"),
        "m0 visible again",
        30,
    )
    assert again["Body"] == "m0"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    for body in ("m1", "m2"):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=received[body]["ReceiptHandle"])
    # and the queue's settings change, it is purged and deleted
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "3600"})
    sqs.tag_queue(QueueUrl=url, Tags={"team": "security"})
    sqs.send_message(QueueUrl=url, MessageBody="to purge")
    sqs.purge_queue(QueueUrl=url)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["MessageRetentionPeriod"] == "3600"
    sqs.delete_queue(QueueUrl=url)
    # then every call succeeded, and the SCRAM secret is in no log line and not in /metrics
    secret = kafka.users[GATEWAY_USER]
    for gateway in gateways:
        assert secret not in gateway.log_path.read_text()
        with urllib.request.urlopen(
            f"{gateway.endpoint}/metrics",
            timeout=10,
            context=ssl.create_default_context(cafile=kafka.ca.cert),
        ) as response:
            assert secret not in response.read().decode()


def test_a_missing_acl_is_named_in_the_error_and_the_log(
    kafka: SecureKafka, tmp_path: Path
) -> None:
    # Given a principal with every documented ACL but WRITE on the queue topics, configured
    # through KQS_KAFKA_* settings in librdkafka's terms (no file)
    password = kafka.add_scram_user(NO_WRITE_USER, "SCRAM-SHA-256")
    queue_topics, *others = acls.GATEWAY
    without_write = tuple(op for op in queue_topics.operations if op != "WRITE")
    kafka.grant(f"User:{NO_WRITE_USER}", [replace(queue_topics, operations=without_write), *others])
    gateway = GatewayProcess(
        tmp_path / "gateway",
        kafka.bootstrap,
        env={
            "KQS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KQS_KAFKA_SASL_MECHANISMS": "SCRAM-SHA-256",
            "KQS_KAFKA_SASL_USERNAME": NO_WRITE_USER,
            "KQS_KAFKA_SASL_PASSWORD": password,
            "KQS_KAFKA_SSL_CA_LOCATION": str(kafka.ca.cert),
        },
    )
    gateway.start(timeout_s=90)
    try:
        sqs = client_for("json", gateway.endpoint)
        url = sqs.create_queue(QueueName="no-write")["QueueUrl"]
        # when it sends a message
        with pytest.raises(sqs.exceptions.ClientError) as refused:
            sqs.send_message(QueueUrl=url, MessageBody="refused")
        # and a batch
        answer = sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "refused"} for i in range(2)]
        )
        # then the error names the grant that is missing, so does each batch entry's, and so
        # does the log
        message = refused.value.response["Error"]["Message"]
        assert "WRITE on topics prefixed 'kqs.'" in message
        assert not answer.get("Successful")
        assert [f["Id"] for f in answer["Failed"]] == ["0", "1"]
        for failed in answer["Failed"]:
            assert "WRITE on topics prefixed 'kqs.'" in failed["Message"]
            assert failed["SenderFault"] is False
        log = gateway.log_path.read_text()
        assert "missing ACL" in log and "WRITE on topics prefixed 'kqs.'" in log
        assert password not in log
    finally:
        gateway.stop()


def _round_trip(bootstrap: str, properties: client_properties.ClientProperties) -> None:
    """Create a topic, produce a record and read it back with KQS's own clients' configs."""
    client_properties.use(bootstrap, properties)
    try:
        topic = f"kqs.login.{uuid.uuid4().hex}"
        admin = TopicAdmin(bootstrap)
        asyncio.run(admin.create_topic(topic, 1, {}))
        producer = Producer({**client_properties.connection(bootstrap), "acks": "all"})
        producer.produce(topic, b"hello")
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                **client_properties.connection(bootstrap),
                "group.id": "kqs-login-check",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        try:
            record = eventually(lambda: consumer.poll(1.0), "the record", 60)
            assert record.error() is None and record.value() == b"hello"
        finally:
            consumer.close()
    finally:
        client_properties.use(bootstrap, client_properties.ClientProperties())


def test_plain_over_tls_as_confluent_cloud_writes_it(kafka: SecureKafka) -> None:
    kafka.grant(f"User:{PLAIN_USER}", acls.GATEWAY)
    config = kafka.properties_file(
        "confluent-plain",
        {
            "bootstrap.servers": kafka.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            f"required username='{PLAIN_USER}' password='{kafka.users[PLAIN_USER]}';",
            # A public CA on Confluent Cloud; the test CA here.
            "ssl.ca.location": str(kafka.ca.cert),
        },
    )
    properties = client_properties.load(config, environ={})
    assert properties.bootstrap == kafka.bootstrap
    _round_trip(properties.bootstrap, properties)


def test_mutual_tls(kafka: SecureKafka) -> None:
    # The SSL listener maps a certificate's CN to the principal: User:kqs-mtls.
    kafka.grant("User:kqs-mtls", acls.GATEWAY)
    client = kafka.ca.pem("kqs-mtls")
    properties = client_properties.load(
        environ={
            "KQS_KAFKA_SECURITY_PROTOCOL": "SSL",
            "KQS_KAFKA_SSL_CA_LOCATION": str(kafka.ca.cert),
            "KQS_KAFKA_SSL_CERTIFICATE_LOCATION": str(client.cert),
            "KQS_KAFKA_SSL_KEY_LOCATION": str(client.key),
        }
    )
    _round_trip(kafka.ssl_bootstrap, properties)


def test_oauthbearer_with_oidc_client_credentials(kafka: SecureKafka) -> None:
    kafka.grant("User:kqs-oidc", acls.GATEWAY)
    with token_endpoint("kqs-oidc") as oidc:
        config = kafka.properties_file(
            "oidc",
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": oidc.client_id,
                "sasl.oauthbearer.client.secret": oidc.client_secret,
                "sasl.oauthbearer.token.endpoint.url": oidc.url,
                "sasl.oauthbearer.scope": "kafka",
                "ssl.ca.location": str(kafka.ca.cert),
            },
        )
        _round_trip(kafka.bootstrap, client_properties.load(config, environ={}))
        # the token came from the endpoint, by the client credentials grant
        assert oidc.requests and oidc.requests[0]["grant_type"] == "client_credentials"
        assert oidc.requests[0].get("scope") == "kafka"


def test_the_analytics_and_their_dashboard_run_over_sasl_ssl_with_their_acls(
    kafka: SecureKafka,
    gateways: list[GatewayProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", str(kafka.ca.cert))  # the gateways serve HTTPS
    # Given the analytics' own principal with only its documented ACLs, configured in
    # librdkafka's terms (which Spark's Java clients get translated), and events to analyse
    password = kafka.add_scram_user(ANALYTICS_USER, "SCRAM-SHA-256")
    kafka.grant(f"User:{ANALYTICS_USER}", acls.ANALYTICS)
    config = kafka.properties_file(
        "analytics",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": ANALYTICS_USER,
            "sasl.password": password,
            "ssl.ca.location": str(kafka.ca.cert),
        },
    )
    sqs = client_for("json", gateways[0].endpoint)
    url = sqs.create_queue(QueueName="secure-analytics")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="counted")
    dashboard_port = free_port()
    log_path = tmp_path / "analytics.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "gateway.cli.main", "analytics",
                "--bootstrap", kafka.bootstrap, "--kafka-config", str(config),
                "--data-dir", str(tmp_path / "data"), "--trigger-seconds", "1",
                "--file-trigger-seconds", "5", "--dashboard-port", str(dashboard_port),
                "--log-format", "json",
            ],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )  # fmt: skip
    try:
        # when `kqs analytics` runs, then Spark reads the events and writes metrics over
        # SASL_SSL, and its dashboard reads them back
        def metrics_on_the_dashboard() -> dict[str, Any] | None:
            assert process.poll() is None, log_path.read_text()[-4000:]
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{dashboard_port}/api/summary", timeout=5
                ) as response:
                    feed: dict[str, Any] = json.loads(response.read())["feed"]
            except OSError:
                return None
            return feed if feed["records"].get("__kqs_metrics", 0) > 0 else None

        feed = eventually(metrics_on_the_dashboard, "metrics on the dashboard", 900)
        assert feed["error"] is None
        assert password not in log_path.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
