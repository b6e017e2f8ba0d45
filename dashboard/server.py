"""The dashboard's HTTP server: the page, its static files and the JSON it polls.

    GET /              the page (dashboard/static/index.html)
    GET /static/...    dashboard.js, dashboard.css (no build step, no CDN: works offline)
    GET /api/summary   the model as JSON (`DashboardModel.summary` plus the feed's status);
                       `?limit=N&q=text`: the N busiest queues whose names contain text
    GET /health        200 once serving
    /messages, /api/messages, /api/replay: the message list (dashboard/messages.py)

Two ways to run it: `run_dashboard(bootstrap, host, port)` blocks until SIGINT or SIGTERM
(`kqs dashboard`); `DashboardServer(bootstrap, host, port)` runs it on a thread of its own
beside something else (`kqs analytics` next to its Spark jobs), as a context manager.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from pathlib import Path
from types import TracebackType

from aiohttp import web

from dashboard.feed import DEFAULT_TOPICS, Feed, Topics
from dashboard.messages import GatewayClient, add_message_routes

log = logging.getLogger("kqs.dashboard")

DEFAULT_PORT = 9325
STATIC_DIR = Path(__file__).parent / "static"
FEED_KEY = web.AppKey("feed", Feed)


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


# The most cards one `/api/summary?limit=` answer holds (the page asks for SHOWN_QUEUES).
MAX_LIMIT = 1000


async def _summary(request: web.Request) -> web.Response:
    """`?limit=N&q=text`: the N busiest queues and DLQs whose names contain `text`; without
    `limit`, every one by name."""
    limit_text = request.query.get("limit", "")
    if limit_text and not (limit_text.isdigit() and 0 < int(limit_text) <= MAX_LIMIT):
        raise web.HTTPBadRequest(text=f"limit must be 1..{MAX_LIMIT}")
    limit = int(limit_text) if limit_text else None
    summary = request.app[FEED_KEY].summary(limit, request.query.get("q", ""))
    return web.json_response(summary, headers={"Cache-Control": "no-store"})


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="OK")


def build_dashboard_app(feed: Feed, gateway: GatewayClient | None = None) -> web.Application:
    """The aiohttp app over a feed (and a gateway, for the message list); the caller starts
    and stops the feed."""
    app = web.Application()
    add_message_routes(app, gateway)
    app[FEED_KEY] = feed
    app.router.add_get("/", _index)
    app.router.add_get("/api/summary", _summary)
    app.router.add_get("/health", _health)
    app.router.add_static("/static", STATIC_DIR)
    return app


async def _start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    # No access log: an open page polls every 3 s, which would be 20 lines a minute per tab.
    runner = web.AppRunner(app, shutdown_timeout=2, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    url = f"http://{bound_host}:{bound_port}/"
    log.info("dashboard listening", extra={"url": url})
    return runner, url


async def _serve_until_signal(
    feed: Feed, host: str, port: int, gateway: GatewayClient | None
) -> None:
    runner, _ = await _start_site(build_dashboard_app(feed, gateway), host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def run_dashboard(
    bootstrap: str,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    gateway: GatewayClient | None = None,
) -> int:
    """Serve the dashboard of the cluster at `bootstrap` until SIGINT or SIGTERM; returns 0."""
    feed = Feed(bootstrap)
    feed.start()
    try:
        asyncio.run(_serve_until_signal(feed, host, port, gateway))
    finally:
        feed.stop()
    return 0


class DashboardServer:
    """The dashboard on a background thread: `with DashboardServer(...) as server: server.url`.

    `start()` returns once the port is bound (or raises what binding raised); `stop()` closes
    the server and the feed. Port 0 picks a free port.
    """

    def __init__(
        self,
        bootstrap: str,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        topics: Topics = DEFAULT_TOPICS,
        gateway: GatewayClient | None = None,
    ) -> None:
        self.feed = Feed(bootstrap, topics)
        self._gateway = gateway
        self._host = host
        self._port = port
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kqs-dashboard", daemon=True)

    def start(self) -> DashboardServer:
        self.feed.start()
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self.feed.stop()
            raise self._failure
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)
        self.feed.stop()

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            runner, self.url = await _start_site(
                build_dashboard_app(self.feed, self._gateway), self._host, self._port
            )
        except OSError as exc:
            self._failure = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()
