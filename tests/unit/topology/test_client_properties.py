"""`topology/client_properties.py`: one `client.properties` (either dialect) and the
`KQS_KAFKA_*` settings, rendered for librdkafka and for Java (Spark), secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from topology import client_properties
from topology.client_properties import ClientProperties, ClientPropertiesError

SECRET = 's3cr3t-\\"value'


def test_a_java_properties_file_is_read_as_java_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# MSK's SCRAM example\n"
        "! another comment\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism:SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" password="p@ss=w:rd";\n'
        "ssl.truststore.location /etc/ssl/ca\\u002epem\n"
        "ssl.truststore.type=PEM\n"
    )
    properties = client_properties.load(path, environ={})
    assert properties.values == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p@ss=w:rd";',
        "ssl.truststore.location": "/etc/ssl/ca.pem",
        "ssl.truststore.type": "PEM",
    }
    # librdkafka gets its own terms
    assert properties.librdkafka() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "p@ss=w:rd",
        "ssl.ca.location": "/etc/ssl/ca.pem",
    }


def test_librdkafka_terms_become_java_terms_for_spark() -> None:
    properties = ClientProperties(
        {
            "bootstrap.servers": "b:9096",
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": 'key"1',
            "sasl.password": SECRET,
            "ssl.ca.location": "/ca.pem",
            "client.id": "kqs",
        }
    )
    assert properties.java() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="key\\"1" password="s3cr3t-\\\\\\"value";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
    }
    # and the Java text reads back as the same credentials
    back = ClientProperties(properties.java()).librdkafka()
    assert (back["sasl.username"], back["sasl.password"]) == ('key"1', SECRET)


def test_oidc_client_credentials_in_both_dialects() -> None:
    librdkafka_style = ClientProperties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "kqs",
            "sasl.oauthbearer.client.secret": SECRET,
            "sasl.oauthbearer.scope": "kafka",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        }
    )
    java = librdkafka_style.java()
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert java["sasl.login.callback.handler.class"].endswith("OAuthBearerLoginCallbackHandler")
    assert java["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    )
    back = ClientProperties(java).librdkafka()
    for key in ("sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.scope"):
        assert back[key] == librdkafka_style.librdkafka()[key]
    assert back["sasl.oauthbearer.client.secret"] == SECRET


def test_mutual_tls_pem_files_go_inline_to_java(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    (tmp_path / "k.pem").write_text("-----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----\n")
    properties = ClientProperties(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(tmp_path / "c.pem"),
            "ssl.key.location": str(tmp_path / "k.pem"),
        }
    )
    java = properties.java()
    assert java["ssl.keystore.type"] == "PEM"
    assert "BEGIN CERTIFICATE" in java["ssl.keystore.certificate.chain"]
    assert "BEGIN PRIVATE KEY" in java["ssl.keystore.key"]


def test_kqs_kafka_settings_are_security_keys_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\nsasl.mechanism=PLAIN\n")
    environ = {
        "KQS_KAFKA_CONFIG": str(path),
        "KQS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KQS_KAFKA_SASL_OAUTHBEARER_CLIENT_ID": "kqs",
        "KQS_KAFKA_SSL_ENDPOINT__IDENTIFICATION": "x",  # `__` is `_`
        # KQS's own settings of the prefix are not client properties
        "KQS_KAFKA_BOOTSTRAP": "b:9092",
        "KQS_KAFKA_PORT": "9092",
    }
    assert client_properties.load(environ=environ).values == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.oauthbearer.client.id": "kqs",
        "ssl.endpoint_identification": "x",
    }


def test_secrets_never_show(tmp_path: Path) -> None:
    properties = ClientProperties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.username": "alice",
            "sasl.password": SECRET,
            "sasl.oauthbearer.client.secret": SECRET,
            "ssl.key.password": SECRET,
            "ssl.keystore.password": SECRET,
            "sasl.jaas.config": f'x required password="{SECRET}";',
        },
        source="client.properties",
    )
    for shown in (repr(properties), str(properties), str(properties.redacted())):
        assert SECRET not in shown and "alice" in shown
    assert SECRET not in str(properties.summary())
    # nor in the errors: a login librdkafka cannot use is named, its options are not
    with pytest.raises(ClientPropertiesError) as error:
        ClientProperties(
            {"sasl.jaas.config": f'com.example.Custom required password="{SECRET}";'}
        ).librdkafka()
    assert "com.example.Custom" in str(error.value) and SECRET not in str(error.value)


def test_what_librdkafka_cannot_read_is_refused_by_name() -> None:
    with pytest.raises(ClientPropertiesError, match="JKS truststore"):
        ClientProperties({"ssl.truststore.location": "/t.jks"}).librdkafka()
    with pytest.raises(ClientPropertiesError, match="No such file"):
        client_properties.load("/nonexistent/client.properties", environ={})


def test_clients_of_a_registered_cluster_get_its_properties() -> None:
    properties = ClientProperties({"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"})
    client_properties.use("secured:9093", properties)
    try:
        assert client_properties.connection("secured:9093") == {
            "bootstrap.servers": "secured:9093",
            "security.protocol": "SSL",
            "ssl.ca.location": "/ca.pem",
        }
        assert client_properties.connection("other:9092") == {"bootstrap.servers": "other:9092"}
    finally:
        client_properties.use("secured:9093", ClientProperties())
    assert client_properties.connection("secured:9093") == {"bootstrap.servers": "secured:9093"}


def test_every_kafka_client_of_kqs_starts_from_connection() -> None:
    """A client config written with its own "bootstrap.servers" would skip the cluster's
    security settings: only these modules may spell it."""
    root = Path(__file__).resolve().parents[3]
    allowed = {
        "topology/client_properties.py",  # `connection` itself
        "topology/embedded/broker.py",  # the embedded broker's readiness probe (its own listener)
        "spark_streaming/settings.py",  # `admin_config`, from the analytics' own properties
    }
    spelled = {
        path.relative_to(root).as_posix()
        for package in ("gateway", "topology", "dashboard", "spark_streaming", "lease_store")
        for path in (root / package).rglob("*.py")
        if '"bootstrap.servers"' in path.read_text(encoding="utf-8")
    }
    assert spelled <= allowed, spelled - allowed
