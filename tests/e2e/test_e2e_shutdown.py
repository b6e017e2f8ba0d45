"""Graceful shutdown: SIGTERM answers parked long polls, finishes sends, loses nothing."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.harness import GatewayProcess, free_port, json_client, signed_headers
from tests.support.prometheus_text import scrape
from topology.embedded import broker

SENDERS = 4


def _report(line: str) -> None:
    print(line)  # noqa: T201 - the measured times are reported, not only asserted


@dataclass
class _Attempt:
    began: float
    ended: float = 0.0
    message_id: str | None = None
    error: str | None = None


def _send_until_refused(endpoint: str, url: str, attempts: list[_Attempt]) -> None:
    client = json_client(endpoint)
    while True:
        attempt = _Attempt(time.monotonic())
        attempts.append(attempt)
        try:
            response = client.send_message(QueueUrl=url, MessageBody=str(uuid.uuid4()))
            attempt.message_id = response["MessageId"]
        except Exception as exc:  # noqa: BLE001 - any failure ends this sender
            attempt.error = f"{type(exc).__name__}: {exc}"
            return
        finally:
            attempt.ended = time.monotonic()


class _SlowUpload:
    """A SendMessage whose headers are sent now and whose body is sent later."""

    def __init__(self, port: int, url: str) -> None:
        self._body = json.dumps({"QueueUrl": url, "MessageBody": "uploaded slowly"}).encode()
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        headers = signed_headers(
            f"http://127.0.0.1:{port}/",
            self._body,
            {
                "Content-Type": "application/x-amz-json-1.0",
                "X-Amz-Target": "AmazonSQS.SendMessage",
            },
        )
        lines = "".join(
            f"{name}: {value}\r\n"
            for name, value in headers.items()
            if name.lower() not in ("host", "content-length")
        )
        self._sock.sendall(
            (
                f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{lines}"
                f"Content-Length: {len(self._body)}\r\n\r\n"
            ).encode()
        )

    def finish(self) -> tuple[int, dict[str, Any]]:
        """Send the body; the status and JSON of the answer (the server then closes)."""
        with self._sock:
            self._sock.sendall(self._body)
            raw = b""
            while chunk := self._sock.recv(65536):
                raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head, "connection closed without an answer"
        status = int(head.split(b" ", 2)[1])
        return status, json.loads(body)


def _drain(sqs: Any, url: str, expected: int) -> set[str]:
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while len(seen) < expected and time.monotonic() < deadline:
        response = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=1
        )
        seen.update(m["MessageId"] for m in response.get("Messages", []))
    return seen


def test_sigterm_during_long_poll_and_sends(kafka_bootstrap: str, tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path / "gateway", kafka_bootstrap)
    gateway.start()
    try:
        sqs = json_client(gateway.endpoint)
        idle_url = sqs.create_queue(QueueName=f"idle-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        work_url = sqs.create_queue(QueueName=f"work-{uuid.uuid4().hex[:8]}")["QueueUrl"]

        # Given a client parked in a 20 s long poll on an empty queue
        poll: dict[str, Any] = {}

        def long_poll() -> None:
            try:
                poll["response"] = json_client(gateway.endpoint).receive_message(
                    QueueUrl=idle_url, WaitTimeSeconds=20
                )
            except Exception as exc:  # noqa: BLE001 - reported by the assertions below
                poll["error"] = exc
            poll["answered"] = time.monotonic()

        poller = threading.Thread(target=long_poll)
        poller.start()
        # and a send whose request body is still on its way
        slow = _SlowUpload(gateway.port, work_url)
        # and senders keeping sends in flight
        attempts: list[list[_Attempt]] = [[] for _ in range(SENDERS)]
        senders = [
            threading.Thread(target=_send_until_refused, args=(gateway.endpoint, work_url, a))
            for a in attempts
        ]
        for sender in senders:
            sender.start()
        while sum(len(a) for a in attempts) < 40:
            time.sleep(0.05)
        assert "answered" not in poll  # still parked

        # When the gateway gets SIGTERM
        signalled = time.monotonic()
        gateway.send_signal(signal.SIGTERM)

        # Then the long poll is answered at once, empty
        poller.join(timeout=25)
        assert "error" not in poll, poll.get("error")
        answer_s = poll["answered"] - signalled
        _report(f"long poll answered {answer_s:.3f} s after SIGTERM")
        assert "Messages" not in poll["response"]
        assert answer_s < 10
        # and the send whose body arrives after the signal is answered too
        time.sleep(0.2)
        status, answer = slow.finish()
        assert status == 200, answer
        slow_id = answer["MessageId"]
        # and the process exits 0, promptly
        exit_code = gateway.wait(timeout_s=40)
        exited_s = time.monotonic() - signalled
        _report(f"gateway exited {exited_s:.3f} s after SIGTERM with code {exit_code}")
        assert exit_code == 0
        assert exited_s < 10
        for sender in senders:
            sender.join(timeout=30)

        # and every send that was being handled when the signal came was answered
        everything = [attempt for per_sender in attempts for attempt in per_sender]
        in_flight = [a for a in everything if a.began < signalled < a.ended]
        answered = [a for a in in_flight if a.message_id is not None]
        # A send begun a moment before the signal may find the listening socket closed: it
        # never reached the gateway (connection refused) and is safe to retry. Any other
        # failure would be a send cut off while the gateway handled it.
        refused = [a for a in in_flight if (a.error or "").startswith("EndpointConnectionError")]
        acknowledged = {a.message_id for a in everything if a.message_id is not None}
        _report(
            f"sends: {len(acknowledged)} acknowledged, {len(in_flight)} in flight at SIGTERM: "
            f"{len(answered)} answered, {len(refused)} refused at connect"
        )
        assert answered, "no send was being handled at SIGTERM"
        assert len(answered) + len(refused) == len(in_flight), [a.error for a in in_flight]

        # When it starts again
        began = time.monotonic()
        gateway.start()
        restart_s = time.monotonic() - began
        _report(f"restart: process start to /health OK in {restart_s:.3f} s")

        # Then every acknowledged message is there
        sqs = json_client(gateway.endpoint)
        expected = acknowledged | {slow_id}
        assert _drain(sqs, work_url, len(expected)) >= expected
    finally:
        gateway.stop()


def test_a_killed_gateways_broker_is_adopted_and_stopped_cleanly_by_the_next_one(
    tmp_path: Path,
) -> None:
    # Given `kqs serve` with its embedded broker, and a message in a queue
    env = {"KQS_KAFKA_PORT": str(free_port()), "KQS_KAFKA_CONTROLLER_PORT": str(free_port())}
    gateway = GatewayProcess(tmp_path / "gateway", bootstrap="", env=env)
    kafka_dir = tmp_path / "gateway" / "kafka"
    try:
        gateway.start(timeout_s=180)
        sqs = json_client(gateway.endpoint)
        url = sqs.create_queue(QueueName=f"orphan-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        sent = sqs.send_message(QueueUrl=url, MessageBody="kept")["MessageId"]
        first_pid = gateway.pid
        # (answered after the gateway synced its segment: `kqs serve` does, on its own broker)
        assert scrape(gateway.endpoint).value("kqs_queue_segment_syncs_total") > 0

        # When the gateway is killed with SIGKILL, its broker outlives it, owned by nobody
        gateway.kill()
        status = broker.status(kafka_dir)
        assert status.running and status.owner_pid == first_pid and not status.owner_alive

        # When the next `kqs serve` starts, it adopts that broker (the message is there)
        gateway.start(timeout_s=180)
        status = broker.status(kafka_dir)
        assert (status.owner_pid, status.owner_alive) == (gateway.pid, True)
        received = json_client(gateway.endpoint).receive_message(QueueUrl=url, WaitTimeSeconds=5)
        assert [m["MessageId"] for m in received["Messages"]] == [sent]
        logged_before_stop = gateway.log_path.stat().st_size

        # and is stopped with SIGTERM
        assert gateway.terminate() == 0

        # Then the broker stopped with it, and the stop logged no error: the gateway's Kafka
        # clients were closed before the broker, and librdkafka writes no raw lines
        assert not broker.status(kafka_dir).running
        with gateway.log_path.open("rb") as log:
            log.seek(logged_before_stop)
            stop_lines = log.read().decode(errors="replace").splitlines()
        _report("stop: " + " | ".join(stop_lines))
        assert not [line for line in stop_lines if not line.startswith("{")], stop_lines
        levels = {json.loads(line)["level"] for line in stop_lines}
        assert levels <= {"info"}, stop_lines
        assert any("broker stopped" in line for line in stop_lines)
    finally:
        gateway.stop()
        broker.stop(kafka_dir, timeout=10)
