"""The files a jar broker starts from, written into its data directory on every start:
``server.properties`` (one combined broker and controller, or a node of a multi-node cluster:
``ClusterNode``), ``log4j2.xml``, and the JVM's command line. The broker itself is
``broker.py``'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

_NODE_ID = 1
_CONFIG_FILE = "server.properties"
_LOG4J_FILE = "log4j2.xml"
_LOG_FILE = "broker.log"
_LOG_DIRS = "kraft-logs"


@dataclass(frozen=True)
class ClusterNode:
    """One node of a multi-node KRaft cluster of jar brokers (each a combined broker and
    controller), for tests and local trials of a replicated deployment.

    Every node is formatted with the same ``cluster_id`` and lists the same ``voters``
    (``"1@127.0.0.1:19093,2@..."``), so the controllers form one quorum; its topics default
    to ``replication_factor`` replicas, of which ``min_insync_replicas`` must acknowledge an
    ``acks=all`` write.
    """

    node_id: int
    voters: str
    cluster_id: str
    replication_factor: int = 3
    min_insync_replicas: int = 2


@dataclass(frozen=True)
class SecureListeners:
    """A broker that refuses plaintext clients, as production clusters do (tests and trials of
    KQS's Kafka client security; see docs/architecture/kafka-security.md).

    The broker's port is a SASL_SSL listener (PLAIN, SCRAM-SHA-256/512, and OAUTHBEARER
    when `unsecured_oauthbearer`), `ssl_port` an SSL listener that requires a client
    certificate signed by `ca` (mutual TLS; the principal is the certificate's CN).
    The StandardAuthorizer is on and denies what no ACL allows; `admin_user` (a PLAIN user,
    also the broker's own inter-broker login) is a super user. SCRAM users are created
    through the admin API by whoever needs them; PLAIN users are the static `plain_users`.

    The controller listener stays plaintext on loopback, and its principal (ANONYMOUS) is a
    super user: the broker half of the one JVM calls the controller half through it.
    """

    keystore: Path  # PKCS12: the broker's key and certificate (SAN: the listeners' host)
    keystore_password: str
    ca: Path  # PEM: the CA certificates the broker's and the clients' certificates chain to
    ssl_port: int
    admin_user: str
    admin_password: str
    plain_users: tuple[tuple[str, str], ...] = ()
    # OAUTHBEARER with Kafka's unsecured-token validator: any well-formed unsigned JWT is
    # accepted (its `sub` is the principal). For testing the clients' OIDC flow only.
    unsecured_oauthbearer: bool = False

    def server_properties(self, host: str, port: int, controller_port: int) -> dict[str, str]:
        users = ((self.admin_user, self.admin_password), *self.plain_users)
        plain = " ".join(f"user_{name}={_jaas_quote(secret)}" for name, secret in users)
        mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        props = {
            "listeners": f"SASL_SSL://{host}:{port},SSL://{host}:{self.ssl_port},"
            f"CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"SASL_SSL://{host}:{port},SSL://{host}:{self.ssl_port}",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f"username={_jaas_quote(self.admin_user)} "
                f"password={_jaas_quote(self.admin_password)} {plain};"
            ),
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": _SCRAM_SERVER,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _SCRAM_SERVER,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.keystore_password,
            "ssl.key.password": self.keystore_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "listener.name.ssl.ssl.client.auth": "required",
            # A client certificate's principal is its CN (User:kqs-gateway), not the whole DN.
            "ssl.principal.mapping.rules": "RULE:^(.*,)?CN=([^,]+)(,.*)?$/$2/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{self.admin_user};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }
        if self.unsecured_oauthbearer:
            mechanisms.append("OAUTHBEARER")
            props["listener.name.sasl_ssl.oauthbearer.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f"unsecuredLoginStringClaim_sub={_jaas_quote(self.admin_user)};"
            )
        props["sasl.enabled.mechanisms"] = ",".join(mechanisms)
        return props

    def admin_client(self) -> dict[str, str]:
        """librdkafka properties of the super user (readiness checks, SCRAM users, ACLs)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": self.admin_user,
            "sasl.password": self.admin_password,
            "ssl.ca.location": str(self.ca),
        }


_SCRAM_SERVER = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def log_dir(data_dir: Path) -> Path:
    """The broker's `log.dirs`: a directory per topic partition, holding its segments."""
    return data_dir / _LOG_DIRS


def _write_server_properties(
    data_dir: Path,
    host: str,
    port: int,
    controller_port: int,
    flush_every_message: bool,
    cluster: ClusterNode | None = None,
    secure: SecureListeners | None = None,
) -> Path:
    props: dict[str, str | int] = {
        # Combined mode: one JVM is both the KRaft controller and the broker.
        "process.roles": "broker,controller",
        "node.id": _NODE_ID,
        # A static voter set (rather than 4.x's dynamic controller.quorum.bootstrap.servers)
        # lets a later start use a different controller port without re-formatting.
        "controller.quorum.voters": f"{_NODE_ID}@{host}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(log_dir(data_dir)),
        # Internal topics default to 3 replicas, which one node can never satisfy.
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "min.insync.replicas": 1,
        "default.replication.factor": 1,
        "num.partitions": 1,
        # kqs creates its topics explicitly; a typo must not silently create a topic.
        "auto.create.topics.enable": "false",
        # Nobody else will join, so don't make the first consumer wait 3 s for them.
        "group.initial.rebalance.delay.ms": 0,
        # One node serving one gateway on the same machine (often the same core): Kafka's
        # server-sized thread pools (3 network, 8 I/O, 10 background) only add context
        # switches. Measured with the benchmark's single and batch workloads, server pinned
        # to one core: 1.22x and 1.18x the messages, 0.80x and 0.85x the CPU per message,
        # together with the serial collector below (bench/results/archive/profile-journal.md, 2026-11-24 (223251b)).
        "num.network.threads": 1,
        "num.io.threads": 2,
        "background.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.cleaner.threads": 1,
        # How often the log flusher looks for logs due a time-based flush: only topics with a
        # `flush.ms` have one (the queue topics whose records the gateway syncs itself; see
        # topology/admin.py SYNCED_BY_GATEWAY). Kafka's default is never.
        "log.flush.scheduler.interval.ms": 10_000,
    }
    if cluster is not None:
        replicas, min_isr = cluster.replication_factor, cluster.min_insync_replicas
        props |= {
            "node.id": cluster.node_id,
            "controller.quorum.voters": cluster.voters,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            "min.insync.replicas": min_isr,
            "default.replication.factor": replicas,
            # A replica that was not in sync never becomes leader: no acknowledged record
            # is lost to an election (Kafka's default, stated because it is the point).
            "unclean.leader.election.enable": "false",
        }
    if secure is not None:
        props |= secure.server_properties(host, port, controller_port)
    if flush_every_message:
        props["log.flush.interval.messages"] = 1
    lines = [
        "# Generated by kqs (topology/embedded/broker_config.py) on every start; edits are overwritten."
    ]
    lines += [f"{key}={_escape_property(str(value))}" for key, value in props.items()]
    path = data_dir / _CONFIG_FILE
    _atomic_write(path, "\n".join(lines) + "\n")
    return path


def _escape_property(value: str) -> str:
    # java.util.Properties treats backslash as an escape character.
    return value.replace("\\", "\\\\")


def _write_log4j_config(data_dir: Path) -> None:
    log_file = xml_escape(str(data_dir / _LOG_FILE), {'"': "&quot;"})
    # Everything goes to one size-capped file; the console (broker.out) stays quiet so
    # that it only shows JVM-level failures.
    xml = f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by kqs (topology/embedded/broker_config.py) on every start; edits are overwritten. -->
<Configuration status="warn">
  <Appenders>
    <RollingFile name="broker" fileName="{log_file}" filePattern="{log_file}.%i">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <Policies>
        <SizeBasedTriggeringPolicy size="50 MB"/>
      </Policies>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="INFO">
      <AppenderRef ref="broker"/>
    </Root>
    <!-- Per-request lines would dwarf everything else at INFO. -->
    <Logger name="kafka.request.logger" level="WARN"/>
  </Loggers>
</Configuration>
"""
    _atomic_write(data_dir / _LOG4J_FILE, xml)


def _java_command(java: str, home: Path, data_dir: Path, heap: str) -> list[str]:
    return [
        java,
        "-Xms128m",
        f"-Xmx{heap}",
        # The serial collector: no concurrent GC threads or G1 barriers competing with the
        # gateway for a small machine. Its full collections stop the broker for a while
        # (about a second with the ~700 MB live heap of 10,000 topics); young ones are short.
        "-XX:+UseSerialGC",
        # C1 only. With tiered compilation C2 compiled the broker's code for as long as it
        # was measured (three fills of 100,000 messages, ~3 minutes: ~20 µs of C2 thread CPU
        # per message in each, ~12 % of the server core the gateway shares), to make the
        # data plane ~3 µs per message cheaper than C1's code (bench/results/archive/profile-journal.md,
        # 2026-11-25 (763ae4a)). The broker's heavy lifting (CRC32C, copies, sockets, fsync) is
        # intrinsics and native code either way.
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={data_dir / _LOG4J_FILE}",
        f"-Dkafka.logs.dir={data_dir}",
        "-cp",
        str(home / "libs" / "*"),  # expanded by the JVM, not by a shell
    ]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
