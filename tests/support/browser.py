"""Debian's chromium, headless: the DOM of a page after its scripts ran, and screenshots.

`scripts/install test` installs chromium when it can (as root, with apt-get); tests that need
it skip, naming why, only when no chromium binary is found.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(chromium: str, args: list[str], timeout_s: float) -> str:
    with tempfile.TemporaryDirectory(prefix="kqs-chromium-") as profile:
        result = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # tests may run as root, where the sandbox refuses to start
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-extensions",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout


def dump_dom(chromium: str, url: str, budget_ms: int = 8000, timeout_s: float = 120) -> str:
    """The page's DOM once `budget_ms` of virtual time passed (scripts, fetches and timers)."""
    return _run(chromium, [f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout_s)


def screenshot(
    chromium: str,
    url: str,
    path: Path,
    width: int = 1400,
    height: int = 1600,
    budget_ms: int = 8000,
    timeout_s: float = 120,
) -> None:
    _run(
        chromium,
        [
            f"--virtual-time-budget={budget_ms}",
            f"--window-size={width},{height}",
            f"--screenshot={path}",
            url,
        ],
        timeout_s,
    )
    if not path.exists():
        raise RuntimeError(f"chromium wrote no screenshot to {path}")
