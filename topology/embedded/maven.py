"""Jars from Maven Central, resolved once into a local cache directory.

The broker jars (`topology/embedded/jars.py`), Spark's Kafka connector (`spark_streaming/jars.py`)
and the benchmark's ElasticMQ (`bench/sidebyside/servers.py`) all arrive the same way: a
generated pom names what is wanted, `mvn dependency:copy-dependencies` copies it and its
runtime closure into a scratch directory, the caller checks and arranges what arrived, and
the scratch directory is renamed into place with a marker file written last::

    <home>/.kqs-complete   JSON that the caller describes the result with
    <home>/libs/*.jar      what Maven copied (the caller may rearrange it)

A home without the marker is never trusted: an interrupted fetch leaves only
`<home>.partial-<pid>` behind, which the next fetch removes. A file lock next to the home
keeps two processes from fetching the same thing at once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topology.embedded import file_lock

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MARKER = ".kqs-complete"
DEFAULT_TIMEOUT_S = 30 * 60.0

# Given the scratch directory (jars in `libs/`), check and arrange it and return what the
# marker records; raise to abandon the fetch.
Finish = Callable[[Path], dict[str, Any]]


class MavenError(RuntimeError):
    """Maven is missing or did not resolve the jars; the message says what to do."""


def is_complete(home: Path) -> bool:
    return (home / MARKER).is_file()


def marker(home: Path) -> dict[str, Any]:
    """What the finished fetch of `home` recorded."""
    recorded: dict[str, Any] = json.loads((home / MARKER).read_text(encoding="utf-8"))
    return recorded


def fetch_once(
    home: Path,
    pom: str,
    finish: Finish,
    *,
    what: str,
    settings_xml: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Path:
    """Resolve `pom`'s runtime dependencies into `home` unless a finished fetch is there.

    `what` names the jars in error messages ("the Kafka 4.3.1 jars"). `settings_xml`, when
    given, is Maven's global settings file for this run (the user's own still applies).
    """
    if is_complete(home):
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    with file_lock.exclusive(home.parent / f"{home.name}.lock"):
        if is_complete(home):  # another process finished while we waited
            return home
        _fetch(home, pom, finish, what, settings_xml, timeout_s)
    return home


def _fetch(
    home: Path,
    pom: str,
    finish: Finish,
    what: str,
    settings_xml: str | None,
    timeout_s: float,
) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(
            f"Apache Maven ('mvn') is needed once to download {what} from Maven Central; "
            "install it (e.g. `apt-get install maven`) and retry"
        )
    # Leftovers of an interrupted fetch; safe to delete because we hold the lock.
    for stale in home.parent.glob(f"{home.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if home.exists():  # a directory without the marker is not trustworthy
        shutil.rmtree(home)
    scratch = home.parent / f"{home.name}.partial-{os.getpid()}"
    scratch.mkdir()
    log = home.parent / f"{home.name}-fetch.log"
    try:
        (scratch / "pom.xml").write_text(pom, encoding="utf-8")
        cmd = [mvn, "-B", "-q"]
        if settings_xml is not None:
            (scratch / "settings.xml").write_text(settings_xml, encoding="utf-8")
            cmd += ["-gs", str(scratch / "settings.xml")]
        cmd += [
            "-f",
            str(scratch / "pom.xml"),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={scratch / 'libs'}",
            "-DincludeScope=runtime",
        ]
        _run(cmd, scratch, log, what, timeout_s)
        recorded = finish(scratch)
        (scratch / MARKER).write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
        os.rename(scratch, home)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _run(cmd: list[str], cwd: Path, log: Path, what: str, timeout_s: float) -> None:
    try:
        with log.open("wb") as out:
            result = subprocess.run(
                cmd,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            )
    except subprocess.TimeoutExpired as exc:
        raise MavenError(
            f"maven did not resolve {what} within {timeout_s:.0f}s; "
            f"check network access to Maven Central and see {log}"
        ) from exc
    if result.returncode != 0:
        hint = _last_error(log) or f"exit code {result.returncode}"
        raise MavenError(
            f"maven failed to resolve {what} ({hint.strip()}); "
            f"check network access to Maven Central and see {log}"
        )


def _last_error(log: Path) -> str | None:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line for line in reversed(lines) if re.search(r"\[ERROR\]", line)), None)
