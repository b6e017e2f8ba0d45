"""Headless chromium driven through the DevTools protocol: open a page, run script in it
(a click, a read of the DOM), as a user would, for pages that act (the dashboard's replay
button) and not only show (`browser.dump_dom`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp

from tests.support.harness import free_port


class Page:
    """One browser tab; every call blocks until chromium answered."""

    def __init__(self, ws_url: str) -> None:
        self._ws_url = ws_url
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._loop.run_until_complete(self._connect())

    async def _connect(self) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(self._ws_url, max_msg_size=0)

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._ws is not None
        call_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads((await self._ws.receive()).data)
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._loop.run_until_complete(self._call(method, params))

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        answer = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0) -> Any:
        """The expression's value once it is truthy."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None  # the page is still loading
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within {timeout_s} s: {expression}")
            time.sleep(0.1)

    def close(self) -> None:
        async def close() -> None:
            if self._ws is not None:
                await self._ws.close()
            if self._session is not None:
                await self._session.close()

        self._loop.run_until_complete(close())
        self._loop.close()


@contextmanager
def browser_page(chromium: str, timeout_s: float = 60.0) -> Iterator[Page]:
    port = free_port()
    # Chromium's helper processes (crashpad, utility) may outlive the browser by a moment and
    # still write to the profile: the whole process group is stopped, and a file they left
    # behind must not fail the test that used the page.
    with tempfile.TemporaryDirectory(prefix="kqs-chromium-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-extensions",
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={port}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/json/list", timeout=2
                    ) as r:
                        targets = [t for t in json.load(r) if t.get("type") == "page"]
                    if targets:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("chromium's DevTools endpoint did not come up")
                time.sleep(0.2)
            page = Page(targets[0]["webSocketDebuggerUrl"])
            try:
                yield page
            finally:
                page.close()
        finally:
            _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM chromium's process group, SIGKILL it if the browser outlives 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # helpers left behind by the browser
