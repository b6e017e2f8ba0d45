"""A jar broker that refuses plaintext, for the Kafka-security tests: certificates made here
with `cryptography`, a SASL_SSL listener and an mTLS listener with the StandardAuthorizer on
(`topology.embedded.broker_config.SecureListeners`), SCRAM users created and ACLs granted
through the admin API, and `client.properties` files written as a user would write them."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import (  # type: ignore[attr-defined]  # not in __all__
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.support.certificates import CertificateAuthority
from tests.support.harness import KafkaCluster, free_port
from topology.acls import GATEWAY, Grant
from topology.embedded import broker
from topology.embedded.broker_config import SecureListeners

HOST = "127.0.0.1"
ADMIN_USER = "kqs-admin"
CLUSTER_GATEWAY_USER = "kqs-gateway"


@dataclass
class SecureKafka:
    """A running secured broker: its two listeners, its CA, and the super user's client."""

    bootstrap: str  # SASL_SSL
    ssl_bootstrap: str  # SSL, client certificate required
    ca: CertificateAuthority
    admin_password: str
    work: Path
    users: dict[str, str] = field(default_factory=dict)

    def admin(self) -> AdminClient:
        """A new admin client of the super user (keep it while its futures are awaited)."""
        return AdminClient({"bootstrap.servers": self.bootstrap, **self.super_user()})

    def super_user(self) -> dict[str, str]:
        """The login of the super user (librdkafka's terms), for the tests' own clients."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password,
            "ssl.ca.location": str(self.ca.cert),
        }

    def add_scram_user(self, name: str, mechanism: str = "SCRAM-SHA-512") -> str:
        """A SCRAM user created through the admin API (AlterUserScramCredentials); its password."""
        password = secrets.token_urlsafe(18)
        kind = (
            ScramMechanism.SCRAM_SHA_512
            if mechanism.endswith("512")
            else ScramMechanism.SCRAM_SHA_256
        )
        upsert = UserScramCredentialUpsertion(
            name, ScramCredentialInfo(kind, 4096), password.encode(), secrets.token_bytes(16)
        )
        admin = self.admin()
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        self.users[name] = password
        return password

    def grant(self, principal: str, grants: Iterable[Grant]) -> None:
        """ACLs through the admin API (CreateAcls), as `kafka-acls.sh --add` would create them."""
        grant_acls(self.admin(), principal, grants)

    def properties_file(self, name: str, values: Mapping[str, str]) -> Path:
        """A `client.properties` file as a user writes one."""
        path = self.work / f"{name}.properties"
        lines = [f"# {name}"] + [f"{k}={_escape(v)}" for k, v in values.items()]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def scram_properties(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """MSK-style SCRAM in the Java dialect: what MSK's documentation has users write."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="{user}" password="{self.users[user]}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.cert),
        }


def grant_acls(admin: AdminClient, principal: str, grants: Iterable[Grant]) -> None:
    """ACLs through the admin API (CreateAcls), as `kafka-acls.sh --add` would create them."""
    bindings = [
        AclBinding(
            ResourceType[grant.resource_type.upper()],
            grant.name,
            ResourcePatternType.PREFIXED if grant.prefixed else ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for grant in grants
        for operation in grant.operations
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=30)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\")


def secure_listeners(
    work: Path, plain_users: Mapping[str, str] | None = None, unsecured_oauthbearer: bool = False
) -> tuple[CertificateAuthority, SecureListeners]:
    """A CA made in `work` and the listeners of a broker whose certificate it signed (for
    127.0.0.1 and localhost: one keystore serves every node of a local cluster)."""
    ca = CertificateAuthority(work / "tls")
    keystore_password = secrets.token_urlsafe(12)
    return ca, SecureListeners(
        keystore=ca.pkcs12("broker", keystore_password, hosts=(HOST, "localhost")),
        keystore_password=keystore_password,
        ca=ca.cert,
        ssl_port=free_port(),
        admin_user=ADMIN_USER,
        admin_password=secrets.token_urlsafe(12),
        plain_users=tuple((plain_users or {}).items()),
        unsecured_oauthbearer=unsecured_oauthbearer,
    )


def secure_cluster(work: Path) -> KafkaCluster:
    """A 3-node `KafkaCluster` (not started) with SASL_SSL listeners, whose gateways log in as
    the PLAIN user `kqs-gateway` (`KafkaCluster.gateway_login`); `grant_gateway_acls` after
    the start gives it the documented ACLs only."""
    password = secrets.token_urlsafe(18)
    ca, secure = secure_listeners(work, plain_users={CLUSTER_GATEWAY_USER: password})
    login = {
        "KQS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KQS_KAFKA_SASL_MECHANISMS": "PLAIN",
        "KQS_KAFKA_SASL_USERNAME": CLUSTER_GATEWAY_USER,
        "KQS_KAFKA_SASL_PASSWORD": password,
        "KQS_KAFKA_SSL_CA_LOCATION": str(ca.cert),
    }
    return KafkaCluster(work, secure=secure, gateway_login=login)


def grant_gateway_acls(cluster: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **cluster.login})
    grant_acls(admin, f"User:{CLUSTER_GATEWAY_USER}", GATEWAY)


@contextlib.contextmanager
def secure_kafka(
    work: Path, plain_users: Mapping[str, str] | None = None, unsecured_oauthbearer: bool = False
) -> Iterator[SecureKafka]:
    """Start a SASL_SSL + mTLS broker with the authorizer on; stopped at the end. PLAIN users
    are the broker's static ones (`plain_users`, name → password); SCRAM users are added
    later (`add_scram_user`)."""
    ca, secure = secure_listeners(work, plain_users, unsecured_oauthbearer)
    admin_password = secure.admin_password
    data_dir = work / "broker"
    port, controller_port = free_port(), free_port()
    try:
        broker.start(
            data_dir, port, controller_port, HOST, heap="512m", secure=secure, ready_timeout=180
        )
        yield SecureKafka(
            f"{HOST}:{port}",
            f"{HOST}:{secure.ssl_port}",
            ca,
            admin_password,
            work,
            users=dict(plain_users or {}),
        )
    finally:
        broker.stop(data_dir, timeout=20)


@dataclass
class TokenEndpoint:
    """An OAuth 2.0 token endpoint (client credentials grant) on loopback, as an OIDC
    provider's: HTTP Basic client authentication, a JWT whose `sub` is the client id.
    Its tokens are unsigned (`alg: none`), which only a broker started with
    `unsecured_oauthbearer` accepts: the client side (librdkafka's OIDC flow) is real."""

    url: str
    client_id: str
    client_secret: str
    requests: list[dict[str, str]] = field(default_factory=list)


@contextlib.contextmanager
def token_endpoint(client_id: str) -> Iterator[TokenEndpoint]:
    import base64
    import http.server
    import json
    import threading
    import time
    import urllib.parse

    secret = secrets.token_urlsafe(18)
    endpoint = TokenEndpoint("", client_id, secret)

    def b64(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            endpoint.requests.append(form)
            expected = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
            if (
                self.headers.get("Authorization") != f"Basic {expected}"
                or form.get("grant_type") != "client_credentials"
            ):
                self.send_response(401)
                self.end_headers()
                return
            now = int(time.time())
            token = (
                f"{b64({'alg': 'none'})}.{b64({'sub': client_id, 'iat': now, 'exp': now + 3600})}."
            )
            body = json.dumps(
                {"access_token": token, "token_type": "bearer", "expires_in": 3600}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
    endpoint.url = f"http://{HOST}:{server.server_address[1]}/oauth2/token"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
