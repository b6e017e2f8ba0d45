"""What the HTTP layer alone costs per request over real sockets: aiohttp against a bare parser.

    .venv/bin/python -m bench.micro.http_layer [--rounds 3] [--seconds 8] [--connections 32]

Each server answers every POST with the same ~1.3 KB JSON body (a ReceiveMessage of one
message's size) and does nothing else, so what it spends is the HTTP layer's: reading and
parsing the request, the request and response objects, writing the answer, the event loop's
share of the socket work. Three servers, each in its own process on core 1 with uvloop:

- `aiohttp-app`: an `aiohttp.web.Application` with one catch-all route, as `kqs serve` runs;
- `aiohttp-server`: aiohttp's low-level `web.Server` (no application, router or middleware);
- `httptools`: an `asyncio.Protocol` feeding `httptools.HttpRequestParser` (the C parser
  uvicorn uses) and writing the answer's bytes itself.

The load comes from one aiohttp client process on core 0 with `--connections` keep-alive
connections (2 s warm-up, then `--seconds` measured). It prints requests/s and the server
process's CPU µs per request over the measured window (`/proc/<pid>/stat`), per round and the
median. The client, on one core, is usually the limit of the request rate; the CPU per request
is the figure to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

SERVERS = ("aiohttp-app", "aiohttp-server", "httptools")
ANSWER = json.dumps(
    {
        "Messages": [
            {
                "MessageId": "m" * 36,
                "ReceiptHandle": "r" * 120,
                "MD5OfBody": "d" * 32,
                "Body": "b" * 1024,
            }
        ]
    }
).encode()
REQUEST_BODY = b"q" * 1200
WARM_UP_S = 2.0


async def _serve_aiohttp(port: int, low_level: bool) -> None:
    from aiohttp import web

    async def answer(request: web.BaseRequest) -> web.Response:
        await request.read()
        return web.Response(body=ANSWER, content_type="application/x-amz-json-1.0")

    if low_level:
        server = web.Server(answer, access_log=None)
        await asyncio.get_running_loop().create_server(server, "127.0.0.1", port)
    else:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


class _BareProtocol(asyncio.Protocol):
    """One connection: requests parsed by httptools, each answered as soon as it is whole."""

    HEAD = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
        b"Content-Length: %d\r\n\r\n" % len(ANSWER)
    )

    def __init__(self) -> None:
        import httptools

        self._parser = httptools.HttpRequestParser(self)
        self._body: list[bytes] = []
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        b"".join(self._body)
        self._body.clear()
        assert self._transport is not None
        self._transport.write(self.HEAD + ANSWER)


async def _serve_httptools(port: int) -> None:
    await asyncio.get_running_loop().create_server(_BareProtocol, "127.0.0.1", port)
    await asyncio.Event().wait()


async def _load(port: int, connections: int, seconds: float) -> int:
    import aiohttp

    done = 0
    end = 0.0

    async def one_connection(session: aiohttp.ClientSession) -> None:
        nonlocal done
        url = f"http://127.0.0.1:{port}/"
        while time.monotonic() < end:
            async with session.post(url, data=REQUEST_BODY) as response:
                await response.read()
            done += 1

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        end = time.monotonic() + WARM_UP_S
        await asyncio.gather(*(one_connection(session) for _ in range(connections)))
        print("measuring", flush=True)  # the parent reads the server's CPU now
        done, end = 0, time.monotonic() + seconds
        await asyncio.gather(*(one_connection(session) for _ in range(connections)))
    return done


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pinned(core: int, *args: str) -> list[str]:
    return ["taskset", "-c", str(core), sys.executable, "-m", "bench.micro.http_layer", *args]


def _round(server: str, seconds: float, connections: int) -> tuple[float, float]:
    """(requests/s, server CPU µs per request) of one measured run."""
    port = _free_port()
    served = subprocess.Popen(_pinned(1, "--serve", server, "--port", str(port)))
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        load = subprocess.Popen(
            _pinned(0, "--load", str(port), "--seconds", str(seconds), "--connections",
                    str(connections)),
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert load.stdout is not None
        assert load.stdout.readline().strip() == "measuring"
        before = _cpu_ticks(served.pid)
        requests = int(load.stdout.readline())
        after = _cpu_ticks(served.pid)
        load.wait(timeout=30)
    finally:
        served.kill()
        served.wait()
    cpu_s = (after - before) / os.sysconf("SC_CLK_TCK")
    return requests / seconds, cpu_s / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--serve", choices=SERVERS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--load", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import uvloop

    if args.serve:
        if args.serve == "httptools":
            uvloop.run(_serve_httptools(args.port))
        else:
            uvloop.run(_serve_aiohttp(args.port, low_level=args.serve == "aiohttp-server"))
        return
    if args.load:
        print(uvloop.run(_load(args.load, args.connections, args.seconds)), flush=True)
        return
    cpu: dict[str, list[float]] = {server: [] for server in SERVERS}
    print("| round | server | requests/s | server CPU µs per request |")
    print("|---|---|---|---|")
    for index in range(1, args.rounds + 1):
        for server in SERVERS:
            rate, per_request = _round(server, args.seconds, args.connections)
            cpu[server].append(per_request)
            print(f"| {index} | {server} | {rate:,.0f} | {per_request:.1f} |", flush=True)
    print()
    for server in SERVERS:
        print(f"{server}: median {statistics.median(cpu[server]):.1f} µs of CPU per request")


if __name__ == "__main__":
    main()
