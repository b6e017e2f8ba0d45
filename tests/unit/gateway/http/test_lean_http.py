"""The lean HTTP front (`gateway/http/lean_http.py`) over real sockets, with handlers of its own.

What the gateway's handlers do is tested end to end through both fronts elsewhere (the e2e
suites run on the default front; `test_e2e_http_fronts.py` runs a round trip on each); these
tests hold the HTTP mechanics: what reaches a handler, the bytes written back, keep-alive and
pipelining, the body limit, `Expect: 100-continue`, malformed requests, a client hanging up
mid-body, and the in-flight count a shutdown's drain waits on.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from gateway.http.lean_http import LeanFront, LeanRequest

MAX_BODY = 1024
INTERNAL = "/internal/v1/"


@dataclass
class InFlight:
    count: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Seen:
    requests: list[dict[str, object]] = field(default_factory=list)
    gone: list[LeanRequest] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    # (body, whether the handler started on the stack that read the request): sends do.
    on_reading_stack: list[tuple[str, bool]] = field(default_factory=list)


async def _describe(request: web.Request) -> dict[str, object]:
    return {
        "method": request.method,
        "path": request.path,
        "raw_path": request.raw_path,
        "query": sorted(request.query.items()),
        "target": request.headers.get("x-amz-target"),
        "host": request.host,
        "remote": request.remote,
        "body": (await request.read()).decode(),
    }


@pytest.fixture
async def served() -> AsyncIterator[tuple[int, Seen, InFlight, LeanFront]]:
    seen = Seen()
    in_flight = InFlight()
    in_flight.idle.set()
    app = web.Application(client_max_size=MAX_BODY)

    async def sqs(request: web.Request) -> web.Response:
        reading = any(frame.name == "data_received" for frame in traceback.extract_stack())
        described = await _describe(request)
        seen.on_reading_stack.append((str(described["body"]), reading))
        seen.requests.append(described)
        if described["body"] == "slow":
            await seen.release.wait()
        if described["body"] == "close":
            response = web.Response(text="closing")
            response.force_close()
            return response
        return web.json_response(described, headers={"X-Answer": "sqs"})

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def internal(request: web.Request) -> web.Response:
        return web.json_response({"operation": request.match_info["operation"]})

    async def refuses(request: web.Request) -> web.Response:
        raise web.HTTPForbidden(text="no")

    front = LeanFront(
        app,
        {("GET", "/health"): health, ("GET", "/forbidden"): refuses},
        INTERNAL,
        internal,
        sqs,
        MAX_BODY,
        in_flight,
        seen.gone.append,
    )
    server = await asyncio.get_running_loop().create_server(front.protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, seen, in_flight, front
    finally:
        seen.release.set()
        front.close_idle()
        server.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(": ")
            headers[name.lower()] = value
    body = await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split(" ")[1]), headers, body


async def _eventually(condition: Callable[[], object]) -> None:
    """Wait (at most 1 s) until `condition()` holds: the server runs on this same loop."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0.01)


def _post(path: str, body: bytes, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: queue.example:9324", *extra]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def test_a_request_reaches_the_handler_whole_and_its_answer_comes_back(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, seen, in_flight, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        _post("/000000000000/a%20queue?Action=X&b=1+2&b=3&empty=", b"hello", "X-Amz-Target: T")
    )
    status, headers, body = await _read_answer(reader)
    assert status == 200
    assert headers["x-answer"] == "sqs"
    assert headers["content-type"].startswith("application/json")
    answer = json.loads(body)
    assert answer == {
        "method": "POST",
        "path": "/000000000000/a queue",
        "raw_path": "/000000000000/a%20queue?Action=X&b=1+2&b=3&empty=",
        "query": [["Action", "X"], ["b", "1 2"], ["b", "3"], ["empty", ""]],
        "target": "T",
        "host": "queue.example:9324",
        "remote": "127.0.0.1",
        "body": "hello",
    }
    assert "connection" not in headers  # kept alive
    assert in_flight.count == 0 and in_flight.idle.is_set()
    writer.close()


async def test_an_absolute_form_target_reaches_the_handler_as_its_path_and_query(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, *_ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post("http://queue.example:9324/000000000000/q?Action=X", b"absolute"))
    answer = json.loads((await _read_answer(reader))[2])
    assert (answer["path"], answer["raw_path"]) == ("/000000000000/q", "/000000000000/q?Action=X")
    writer.close()


async def test_pipelined_requests_are_answered_in_order_on_one_connection(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, seen, _, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(_post("/", f"body-{i}".encode()) for i in range(5)))
    bodies = [json.loads((await _read_answer(reader))[2])["body"] for _ in range(5)]
    assert bodies == [f"body-{i}" for i in range(5)]
    writer.close()


async def test_sends_and_deletes_start_on_the_reading_stack_and_others_a_turn_later(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    """A SendMessage(Batch), by JSON target or Query form, starts inside the `data_received`
    that read it (its record goes to Kafka before the loop's other work), and so does a
    DeleteMessage(Batch) while the gateway says deletes find more (`deletes_now`); the rest
    start on the loop's next turn. A send pipelined behind another request waits its turn,
    and the order holds."""
    port, seen, _, front = served
    deletes_now = True
    front.deletes_now = lambda: deletes_now
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    requests = [
        _post("/", b"json-send", "X-Amz-Target: AmazonSQS.SendMessage"),
        _post("/", b"json-batch", "X-Amz-Target: AmazonSQS.SendMessageBatch"),
        _post("/", b"json-receive", "X-Amz-Target: AmazonSQS.ReceiveMessage"),
        _post("/", b"Action=SendMessage&QueueUrl=q"),
        _post("/", b"Action=SendMessageBatch&QueueUrl=q"),
        _post("/", b"Action=ReceiveMessage&QueueUrl=q"),
        _post("/", b"json-delete", "X-Amz-Target: AmazonSQS.DeleteMessageBatch"),
        _post("/", b"Action=DeleteMessage&QueueUrl=q"),
        _post("/", b"json-visibility", "X-Amz-Target: AmazonSQS.ChangeMessageVisibility"),
    ]
    for request in requests:  # one at a time: each finds nothing being answered
        writer.write(request)
        await _read_answer(reader)
    deletes_now = False
    writer.write(requests[6])
    await _read_answer(reader)
    writer.write(b"".join(requests[2:4]))  # a receive, and a send pipelined behind it
    bodies = [json.loads((await _read_answer(reader))[2])["body"] for _ in range(2)]
    assert bodies == ["json-receive", "Action=SendMessage&QueueUrl=q"]
    assert seen.on_reading_stack == [
        ("json-send", True),
        ("json-batch", True),
        ("json-receive", False),
        ("Action=SendMessage&QueueUrl=q", True),
        ("Action=SendMessageBatch&QueueUrl=q", True),
        ("Action=ReceiveMessage&QueueUrl=q", False),
        ("json-delete", True),
        ("Action=DeleteMessage&QueueUrl=q", True),
        ("json-visibility", False),
        ("json-delete", False),  # deletes no longer find more
        ("json-receive", False),
        ("Action=SendMessage&QueueUrl=q", False),  # answered after the receive, in turn
    ]
    writer.close()


async def test_delivery_reports_are_settled_before_each_read(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    """Before it parses what arrived, the front settles the producer's handed-over delivery
    reports (`settle_delivered`), so sends waiting for them answer ahead of new requests."""
    port, seen, _, front = served
    calls: list[int] = []  # how many requests the handler had seen at each call
    front.settle_delivered = lambda: calls.append(len(seen.requests))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for body in (b"one", b"two"):
        writer.write(_post("/", body, "X-Amz-Target: AmazonSQS.SendMessage"))
        await _read_answer(reader)
    assert calls[0] == 0 and calls[-1] == 1  # before reading the first request, the second
    assert len(seen.requests) == 2
    writer.close()


async def test_routes_health_internal_and_an_http_error_a_handler_raises(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, *_ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert json.loads((await _read_answer(reader))[2]) == {"status": "ok"}
    writer.write(_post(f"{INTERNAL}receive", b"{}"))
    assert json.loads((await _read_answer(reader))[2]) == {"operation": "receive"}
    writer.write(b"GET /forbidden HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = await _read_answer(reader)
    assert (status, body) == (403, b"no")
    writer.write(b"GET /health?Action=ListQueues HTTP/1.1\r\nHost: x\r\n\r\n")
    assert json.loads((await _read_answer(reader))[2]) == {"status": "ok"}
    writer.close()


async def test_connection_close_and_a_handler_forcing_close_end_the_connection(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, *_ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post("/", b"one", "Connection: close"))
    _, headers, _ = await _read_answer(reader)
    assert headers["connection"] == "close"
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post("/", b"close"))
    _, headers, body = await _read_answer(reader)
    assert (headers["connection"], body) == ("close", b"closing")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_a_body_over_the_limit_reaches_the_handler_as_aiohttp_s_413_and_closes(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, seen, in_flight, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post("/", b"x" * (MAX_BODY + 1)))
    status, headers, _ = await _read_answer(reader)
    # The handler's `read` raised HTTPRequestEntityTooLarge, which the front answers.
    assert status == 413
    assert headers["connection"] == "close"
    assert seen.requests == []
    assert await asyncio.wait_for(reader.read(), 5) == b""
    assert in_flight.count == 0
    writer.close()


async def test_expect_100_continue_is_answered_before_the_body(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, *_ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == (
        b"HTTP/1.1 100 Continue\r\n\r\n"
    )
    writer.write(b"body")
    assert json.loads((await _read_answer(reader))[2])["body"] == "body"
    writer.close()


@pytest.mark.parametrize(
    "sent",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        # endless headers: over the 64 KB the front reads of a request's head
        b"POST / HTTP/1.1\r\nHost: x\r\n"
        + b"".join(f"X-Filler-{i}: {'f' * 1000}\r\n".encode() for i in range(100)),
    ],
    ids=["malformed", "endless-headers"],
)
async def test_a_request_the_parser_refuses_gets_400_and_the_connection_closes(
    served: tuple[int, Seen, InFlight, LeanFront], sent: bytes
) -> None:
    port, seen, in_flight, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(sent)
    raw = await asyncio.wait_for(reader.read(), 5)
    assert raw.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert seen.requests == [] and in_flight.count == 0
    writer.close()


async def test_a_client_hanging_up_mid_body_is_reported_and_no_longer_in_flight(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, seen, in_flight, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: T\r\nContent-Length: 100\r\n\r\nab")
    await writer.drain()
    await _eventually(lambda: in_flight.count)
    assert in_flight.count == 1 and not in_flight.idle.is_set()  # its headers arrived
    writer.close()
    await _eventually(lambda: seen.gone)
    assert [request.headers["X-Amz-Target"] for request in seen.gone] == ["T"]
    assert in_flight.count == 0 and in_flight.idle.is_set()
    assert seen.requests == []


async def test_shutdown_closes_idle_connections_and_answers_the_busy_one_first(
    served: tuple[int, Seen, InFlight, LeanFront],
) -> None:
    port, seen, in_flight, front = served
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", port)
    busy_writer.write(_post("/", b"slow"))
    await _eventually(lambda: seen.requests)
    assert in_flight.count == 1
    front.close_idle()
    assert await asyncio.wait_for(idle_reader.read(), 5) == b""
    seen.release.set()
    _, headers, body = await _read_answer(busy_reader)
    assert json.loads(body)["body"] == "slow"
    assert headers["connection"] == "close"  # no keep-alive once shutting down
    assert await asyncio.wait_for(busy_reader.read(), 5) == b""
    assert in_flight.count == 0
    idle_writer.close()
    busy_writer.close()
