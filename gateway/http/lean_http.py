"""A lean HTTP/1.1 front for the gateway's aiohttp application (`KQS_HTTP_FRONT=lean`).

aiohttp's server spends ~85-100 µs of CPU per request on its own (its request handler,
request and response objects and writer, over real sockets), against ~15 µs for a protocol
that feeds the C parser httptools and writes the answer's bytes itself
(`python -m bench.micro.http_layer`); for single-message calls that was most of what separated
a request's cost from the work it asks for. This front accepts the connections itself, parses
with httptools, and calls the application's own handlers (the SQS endpoint, `/health`,
`/metrics`, the internal channel) with a `LeanRequest`, which carries the parts of aiohttp's
`Request` that the gateway reads; their `web.Response` is written back as bytes. The
application still owns the gateway's life (startup, cleanup, the shutdown drain), so both
fronts run the same code past the HTTP parsing.

Requests of one connection are answered one at a time, in order (pipelined ones wait their
turn). A body over the application's `client_max_size` is answered with the SQS
`RequestTooLarge` error and the connection closed, as on aiohttp's front; `Expect:
100-continue` is answered before the body is read; a request the parser refuses gets a bare
400 and the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import parse_qsl, unquote

import httptools
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from gateway.common.eager_start import start_now

if TYPE_CHECKING:
    from collections.abc import Mapping

log = logging.getLogger("kqs.http")


class InFlightCount(Protocol):
    """The application's count of requests being handled (`gateway.app.InFlight`)."""

    count: int
    idle: asyncio.Event


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
# The request line and headers together (aiohttp's parser allows 8,190 bytes per line and
# field; SigV4 headers of an SQS request are well under 4 KB): over it, 400 and a closed
# connection rather than memory held for a client that never ends its headers.
_MAX_HEAD_BYTES = 64 * 1024
# Reading stops while this many whole requests of one connection wait for their turn.
_QUEUED_LIMIT = 16


_date: tuple[int, bytes] = (0, b"")
_SEND_TARGETS = frozenset(("AmazonSQS.SendMessage", "AmazonSQS.SendMessageBatch"))
_DELETE_TARGETS = frozenset(("AmazonSQS.DeleteMessage", "AmazonSQS.DeleteMessageBatch"))


def _is_send(request: LeanRequest) -> bool:
    """SendMessage or SendMessageBatch, by the JSON protocol's target or the Query form."""
    target = request.headers.get("X-Amz-Target")
    if target is not None:
        return target in _SEND_TARGETS
    return b"Action=SendMessage" in request._body


def _is_delete(request: LeanRequest) -> bool:
    """DeleteMessage or DeleteMessageBatch, as `_is_send` tells a send."""
    target = request.headers.get("X-Amz-Target")
    if target is not None:
        return target in _DELETE_TARGETS
    return b"Action=DeleteMessage" in request._body


def _no() -> bool:
    return False


def _nothing_to_settle() -> None:
    pass


def _date_header() -> bytes:
    """`Date`, which HTTP/1.1 servers send (RFC 9110 §6.6.1); formatted once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, f"Date: {formatdate(now, usegmt=True)}\r\n".encode())
    return _date[1]


class LeanRequest:
    """The parts of an aiohttp `web.Request` the gateway's handlers read, for one request."""

    __slots__ = (
        "app", "method", "raw_path", "path", "query_string", "headers", "remote", "host",
        "match_info", "_body", "_query", "_too_large_for",
    )  # fmt: skip

    secure = False
    scheme = "http"

    def __init__(
        self,
        app: web.Application,
        method: str,
        raw_path: str,
        headers: CIMultiDictProxy[str],
        body: bytes,
        remote: str | None,
        local_host: str,
        too_large_for: int | None = None,
    ) -> None:
        self.app = app
        self.method = method
        self.raw_path = raw_path
        path, _, self.query_string = raw_path.partition("?")
        self.path = unquote(path)
        self.headers = headers
        self.remote = remote
        self.host = headers.get("Host", local_host)
        self.match_info: dict[str, str] = {}
        self._body = body
        self._query: MultiDictProxy[str] | None = None
        self._too_large_for = too_large_for  # the limit its body went over

    @property
    def query(self) -> MultiDictProxy[str]:
        if self._query is None:
            pairs = parse_qsl(self.query_string, keep_blank_values=True)
            self._query = MultiDictProxy(MultiDict(pairs))
        return self._query

    async def read(self) -> bytes:
        if self._too_large_for is not None:  # as aiohttp's `read` raises: handlers answer alike
            raise web.HTTPRequestEntityTooLarge(
                max_size=self._too_large_for, actual_size=self._too_large_for + 1
            )
        return self._body


class SecureLeanRequest(LeanRequest):
    """A request that came over TLS (`kqs serve --tls-cert`)."""

    __slots__ = ()
    secure = True
    scheme = "https"


def _origin_form(url: bytes) -> str:
    """The request target as path and query: an absolute-form target (`POST http://host/q`,
    as sent to a proxy) loses its scheme and authority, as aiohttp's parser drops them."""
    if not url.startswith(b"/") and b"://" in url:
        parsed = httptools.parse_url(url)
        path = parsed.path or b"/"
        url = path + b"?" + parsed.query if parsed.query else path
    return url.decode("latin-1")


class LeanProtocol(asyncio.Protocol):
    """One client connection: httptools parses, the application's handlers answer."""

    def __init__(self, front: LeanFront) -> None:
        self._front = front
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._remote: str | None = None
        self._local_host = ""
        self._request_class = LeanRequest  # SecureLeanRequest on a TLS connection
        # The request being parsed.
        self._url = b""
        self._headers: list[tuple[str, str]] = []
        self._head_size = 0
        self._body: list[bytes] = []
        self._size = 0
        self._too_large = False
        self._begun = False  # a request's headers arrived; it counts as in flight
        # Whole requests waiting for their turn, and the task answering them.
        self._queued: deque[tuple[LeanRequest, bool]] = deque()
        self._answering: asyncio.Task[None] | None = None
        self._closing = False

    # -- asyncio ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self._remote = str(peer[0]) if isinstance(peer, tuple) else None
        sock = transport.get_extra_info("sockname")
        if isinstance(sock, tuple):
            self._local_host = f"{sock[0]}:{sock[1]}"
        if transport.get_extra_info("sslcontext") is not None:
            self._request_class = SecureLeanRequest
        self._front.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._front.connections.discard(self)
        self._closing = True
        self._transport = None
        if self._begun:  # hung up before its request was whole
            self._begun = False
            self._front.client_gone(self._request())
            self._front.end()
        for _ in self._queued:  # never answered: no longer in flight
            self._front.end()
        self._queued.clear()

    def data_received(self, data: bytes) -> None:
        # Sends whose records Kafka acknowledged answer before more requests are read.
        self._front.settle_delivered()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse()
        except httptools.HttpParserError:
            self._refuse()
        if self._answering is None and self._queued:
            self._start_answering()

    # -- httptools callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []
        self._head_size = 0
        self._body = []
        self._size = 0
        self._too_large = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_size += len(url)
        if self._head_size > _MAX_HEAD_BYTES:
            raise httptools.HttpParserError("request target too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))
        self._head_size += len(name) + len(value)
        if self._head_size > _MAX_HEAD_BYTES:
            raise httptools.HttpParserError("request headers too long")

    def on_headers_complete(self) -> None:
        # In flight from here, as a request is on aiohttp's front once its handler starts:
        # a shutdown's drain waits for one whose body is still arriving.
        self._begun = True
        self._front.begin()
        length, expects_continue = self._length_and_expect()
        if length is not None and length > self._front.max_body:
            self._answer_too_large()
        elif expects_continue and self._transport is not None:
            self._transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        if self._too_large:
            return
        self._size += len(body)
        if self._size > self._front.max_body:
            self._answer_too_large()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        keep_alive = self._parser.should_keep_alive() and not self._too_large
        self._enqueue(self._request(), keep_alive)

    def _answer_too_large(self) -> None:
        """A body over the limit is not kept: its request is answered RequestTooLarge (by the
        handler, from `read`) and the connection closed, as aiohttp's front does. The rest
        of the body is still read (and dropped): closing a socket with unread data resets
        the connection, and the client would never see the answer."""
        self._too_large = True
        self._body = []

    def _request(self) -> LeanRequest:
        return self._request_class(
            self._front.app,
            self._parser.get_method().decode("ascii", "replace"),
            _origin_form(self._url),
            CIMultiDictProxy(CIMultiDict(self._headers)),
            b"".join(self._body),
            self._remote,
            self._local_host,
            self._front.max_body if self._too_large else None,
        )

    def _enqueue(self, request: LeanRequest, keep_alive: bool) -> None:
        self._begun = False
        self._queued.append((request, keep_alive))
        # Answering starts once the parser returns (`data_received`), from the first request.
        if len(self._queued) >= _QUEUED_LIMIT and self._transport is not None:
            self._transport.pause_reading()

    def _start_answering(self) -> None:
        request = self._queued[0][0]
        if _is_send(request) or (self._front.deletes_now() and _is_delete(request)):
            # A send's answer waits for Kafka: started now, its record is on its way before
            # the loop's other work of this turn, instead of a turn later. So is a delete
            # while deletes find messages left in their queues: its consumer, answered
            # sooner, takes more. Other requests start as Tasks: answering empty receives
            # sooner only makes short-polling consumers poll more (bench/results/archive/
            # profile-journal.md, 2026-11-27 (1fba847) and 2026-11-29 (730104f)).
            start_now(self._answer_queued())  # which sets `_answering` itself
        else:
            self._answering = asyncio.get_running_loop().create_task(self._answer_queued())

    # -- answering -------------------------------------------------------------------------

    async def _answer_queued(self) -> None:
        # Its own Task, also when started by `start_now` (which has no result to assign
        # before the first step, and the first step may be the last).
        self._answering = asyncio.current_task()
        try:
            while self._queued and not self._closing:
                request, keep_alive = self._queued.popleft()
                if self._transport is not None and len(self._queued) < _QUEUED_LIMIT:
                    self._transport.resume_reading()
                try:
                    response = await self._front.respond(request)
                    keep_alive = keep_alive and response.keep_alive is not False
                    keep_alive = keep_alive and not self._front.closing
                    self._write(response, keep_alive)
                finally:
                    self._front.end()
                if not keep_alive:
                    self._close()
                    return
        finally:
            self._answering = None

    def _write(self, response: web.StreamResponse, keep_alive: bool) -> None:
        if self._transport is None:
            return
        body = cast(bytes, getattr(response, "body", b"") or b"")
        status = response.status
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
        for name, value in response.headers.items():
            if name.lower() in ("content-length", "connection", "transfer-encoding"):
                continue
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        lines.append(b"Content-Length: %d\r\n" % len(body))
        lines.append(_date_header())
        if not keep_alive:
            lines.append(b"Connection: close\r\n")
        lines.append(b"\r\n")
        lines.append(body)
        self._transport.write(b"".join(lines))

    def _length_and_expect(self) -> tuple[int | None, bool]:
        """The first Content-Length (None when absent or not a number), and whether the
        client expects `100 Continue`: one pass over the headers."""
        length: int | None = None
        seen_length = expects_continue = False
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == "content-length" and not seen_length:
                seen_length = True
                try:
                    length = int(value)
                except ValueError:
                    length = None
            elif lowered == "expect" and value.lower() == "100-continue":
                expects_continue = True
        return length, expects_continue

    def _refuse(self) -> None:
        if self._begun:  # refused mid-body: no longer in flight (not a client hanging up)
            self._begun = False
            self._front.end()
        if self._transport is not None:
            self._transport.write(_BAD_REQUEST)
        self._close()

    def _close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def close_when_idle(self) -> None:
        """At shutdown: close now if no request is arriving or being answered, else after
        its answer (the front no longer keeps connections alive)."""
        if self._answering is None and not self._begun:
            self._close()


class LeanFront:
    """The listening side: routes each request to the application's handler for it."""

    def __init__(
        self,
        app: web.Application,
        routes: Mapping[tuple[str, str], Handler],
        internal_prefix: str,
        internal: Handler,
        sqs: Handler,
        max_body: int,
        in_flight: InFlightCount,
        client_gone: Callable[[LeanRequest], None],
    ) -> None:
        self.app = app
        self.max_body = max_body
        self._routes = routes
        self._internal_prefix = internal_prefix
        self._internal = internal
        self._sqs = sqs
        # A request counts as in flight (for the shutdown's drain) from its headers to its
        # answer; `client_gone` reports one whose client hung up before its body arrived.
        self._in_flight = in_flight
        self.client_gone = client_gone
        self.connections: set[LeanProtocol] = set()
        self.closing = False
        # Settles the delivery reports the producer has handed over (`AsyncProducer.
        # settle_handed`), called before each read; none until the gateway has started.
        self.settle_delivered: Callable[[], object] = _nothing_to_settle
        # Whether deletes start on the reading stack (`MessageService.deletes_find_more`).
        self.deletes_now: Callable[[], bool] = _no

    def protocol(self) -> LeanProtocol:
        return LeanProtocol(self)

    def begin(self) -> None:
        self._in_flight.count += 1
        self._in_flight.idle.clear()

    def end(self) -> None:
        self._in_flight.count -= 1
        if self._in_flight.count == 0:
            self._in_flight.idle.set()

    async def respond(self, request: LeanRequest) -> web.StreamResponse:
        as_aiohttp = cast(web.Request, request)  # the attributes handlers read (see above)
        try:
            handler = self._routes.get((request.method, request.path))
            if handler is not None:
                return await handler(as_aiohttp)
            if request.method == "POST" and request.path.startswith(self._internal_prefix):
                request.match_info["operation"] = request.path[len(self._internal_prefix) :]
                return await self._internal(as_aiohttp)
            return await self._sqs(as_aiohttp)
        except web.HTTPException as exc:  # as aiohttp answers one a handler raised
            return exc
        except Exception:
            log.exception("request failed outside the SQS handler")
            return web.Response(status=500)

    def close_idle(self) -> None:
        """No keep-alive from now on; idle connections close now, busy ones after answering."""
        self.closing = True
        for connection in list(self.connections):
            connection.close_when_idle()
