"""Raw HTTP bytes into the gateway's HTTP front, without a socket.

`Connection` is one keep-alive client connection: the protocol the gateway's front creates
for each accepted TCP connection (`KQS_HTTP_FRONT`: the lean front's `LeanProtocol`, or a
`RequestHandler` of aiohttp's `web.Server`) attached to a transport that keeps what the server
writes. A request is fed to `data_received` as the event loop would after a socket read, so
the HTTP parser, the request objects, routing and response writing all run; the socket calls
themselves (recv, send, epoll) do not.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.http.pipeline import lean_front


class _Transport(asyncio.Transport):
    """Keeps what the server writes and tells the connection when an answer is complete."""

    def __init__(self, connection: Connection) -> None:
        super().__init__()
        self._connection = connection
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._connection.received(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self._connection.received(b"".join(list_of_data))

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def abort(self) -> None:
        self._closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 9324)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return True

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False


class Connection:
    def __init__(self, runner: web.AppRunner, front: str) -> None:
        server = runner.server
        assert server is not None, "runner.setup() first"
        self._protocol: asyncio.Protocol = (
            lean_front(runner.app).protocol() if front == "lean" else server()
        )
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[int, bytes]] | None = None
        self._protocol.connection_made(_Transport(self))

    def received(self, data: bytes) -> None:
        self._buffer += data
        head_end = self._buffer.find(b"\r\n\r\n")
        if head_end < 0 or self._answer is None:
            return
        head = bytes(self._buffer[:head_end]).decode("latin-1").split("\r\n")
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self._buffer) < head_end + 4 + length:
            return
        status = int(head[0].split(" ", 2)[1])
        body = bytes(self._buffer[head_end + 4 : head_end + 4 + length])
        del self._buffer[: head_end + 4 + length]
        answer, self._answer = self._answer, None
        if not answer.done():
            answer.set_result((status, body))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send one request and return the status and body of its answer."""
        answer: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self._answer = answer
        self._protocol.data_received(raw)
        return await answer

    def close(self) -> None:
        self._protocol.connection_lost(None)
