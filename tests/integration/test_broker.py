"""Tests for topology.embedded.broker: a real Kafka broker from Maven Central jars.

The lifecycle test downloads the jars on its first run (cached in $KQS_CACHE_DIR or
~/.cache/kqs afterwards) and starts a real JVM, so it takes tens of seconds.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from topology.embedded import broker, broker_cli, jars
from topology.embedded.errors import BrokerError


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kafka"
    yield path
    broker.stop(path, timeout=10)  # never leave a JVM behind, whatever the test did


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)]
    ).values():
        future.result(timeout=30)


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[bool] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: delivered.append(err is None))
    assert producer.flush(30) == 0
    assert delivered == [True]


def _consume_one(bootstrap: str, topic: str) -> bytes:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            value = msg.value()
            assert isinstance(value, bytes)
            return value
        raise AssertionError(f"no record on {topic} within 30s")
    finally:
        consumer.close()


def test_broker_lifecycle(data_dir: Path) -> None:
    jars.fetch()
    port, controller_port = _free_port(), _free_port()

    info = broker.start(data_dir, port=port, controller_port=controller_port)
    assert info.started
    assert info.bootstrap == f"127.0.0.1:{port}"
    st = broker.status(data_dir)
    assert st.running and st.pid == info.pid and st.bootstrap == info.bootstrap
    # No broker-wide fsync: the gateway asks for it per topic (topology/admin.py).
    assert "log.flush.interval.messages" not in (data_dir / "server.properties").read_text()

    _create_topic(info.bootstrap, "kqs-test")
    _produce(info.bootstrap, "kqs-test", b"hello")
    assert _consume_one(info.bootstrap, "kqs-test") == b"hello"

    again = broker.start(data_dir, port=port, controller_port=controller_port)
    assert again.pid == info.pid and not again.started

    # The broker logs through log4j2 into broker.log (proves the SLF4J binding works).
    assert "Kafka Server started" in info.log_file.read_text()

    assert broker.stop(data_dir)
    assert not broker.status(data_dir).running
    assert not (data_dir / "broker.pid").exists()
    assert not broker.stop(data_dir)  # idempotent

    # EmbeddedBroker (what `kqs serve` uses) stops the broker it started on exit. A restart
    # reuses the formatted storage, so the record is still there.
    with broker.EmbeddedBroker(data_dir, port=port, controller_port=controller_port) as restarted:
        assert restarted.started and restarted.pid != info.pid
        assert _consume_one(restarted.bootstrap, "kqs-test") == b"hello"
        # ...but leaves alone a broker it found running (someone else owns that one).
        with broker.EmbeddedBroker(data_dir, port=port, controller_port=controller_port) as same:
            assert same.pid == restarted.pid and not same.started
        assert broker.status(data_dir).running
    assert not broker.status(data_dir).running


def _dead_pid() -> int:
    """The pid of a process that has exited (as a `kqs serve` killed with SIGKILL has)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_broker_whose_owner_died_is_adopted_and_stopped_by_the_next_embedder(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a broker started without an owner, as `kqs kafka start` does
    port, controller_port = _free_port(), _free_port()
    info = broker.start(data_dir, port=port, controller_port=controller_port)
    assert broker.status(data_dir).owner_pid is None
    # When an embedder (`kqs serve`) finds it running, it is not adopted: it outlives it
    with broker.EmbeddedBroker(data_dir, port=port, controller_port=controller_port) as found:
        assert (found.pid, found.started, found.adopted) == (info.pid, False, False)
    assert broker.status(data_dir).running
    assert broker_cli.main(["status", "--data-dir", str(data_dir.parent)]) == 0
    assert "owner: none" in capsys.readouterr().out

    # Given the broker's recorded owner is a process that is gone (a SIGKILLed `kqs serve`)
    state = json.loads((data_dir / "broker.json").read_text())
    (data_dir / "broker.json").write_text(json.dumps({**state, "owner_pid": _dead_pid()}))
    assert broker_cli.main(["status", "--data-dir", str(data_dir)]) == 0
    assert "gone; the next `kqs serve` of this data dir adopts it" in capsys.readouterr().out
    # When the next embedder starts, it adopts the broker: owned by it while it runs
    with broker.EmbeddedBroker(data_dir, port=port, controller_port=controller_port) as adopted:
        assert (adopted.pid, adopted.started, adopted.adopted) == (info.pid, False, True)
        status = broker.status(data_dir)
        assert (status.owner_pid, status.owner_alive) == (os.getpid(), True)
    # Then it stops the broker at exit, like one it started
    assert not broker.status(data_dir).running


def test_start_on_port_in_use_raises(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError, match="in use"):
            broker.start(tmp_path / "kafka", port=port, controller_port=_free_port())
    assert not (tmp_path / "kafka" / "broker.pid").exists()


def test_status_of_never_started_dir(tmp_path: Path) -> None:
    st = broker.status(tmp_path)
    assert not st.running and st.pid is None and st.bootstrap is None
    assert not broker.stop(tmp_path)


def test_cli_status_exit_code_when_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert broker_cli.main(["status", "--data-dir", str(tmp_path)]) == 3
    assert "not running" in capsys.readouterr().out


def test_cli_reports_broker_error_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = broker_cli.main(["start", "--data-dir", str(tmp_path), "--port", str(port)])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kqs kafka: error: port") and "\n" not in err


def test_cluster_id_is_kafka_uuid_shaped() -> None:
    for _ in range(200):
        cluster_id = broker.new_cluster_id()
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
        assert not cluster_id.startswith("-")
