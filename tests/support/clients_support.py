"""Toolchain builds and a real S3 server for the client-library tests (tests/clients/).

Everything built or downloaded lands in the KQS cache (``$KQS_CACHE_DIR`` or ``~/.cache/kqs``),
never in the repository, keyed by a hash of the sources it was built from, so a test run builds
each piece at most once and later runs reuse it::

    <cache>/java-clients-<hash>/classes, deps/     tests/clients/java (Maven; jars in ~/.m2)
    <cache>/node-clients-<hash>/node_modules/      tests/clients/node/package*.json (npm ci)
    <cache>/go-clients-<hash>/sqs-roundtrip        tests/clients/go (Go module proxy; ~/go/pkg/mod)
    <cache>/versitygw-<version>/bin/versitygw      the S3 server (go install)

A finished build writes ``.kqs-complete`` last (``topology/embedded/maven.py``'s convention); a file
lock keeps two processes from building the same thing at once. A missing toolchain (java,
mvn, node, npm, go) makes the tests that need it fail under ``CI`` and skip elsewhere, saying
why (`require_tool`). ``python -m tests.support.clients_support`` builds everything it can ahead of
the tests (``scripts/install test`` runs it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.support.harness import free_port
from topology.embedded import file_lock

REPO = Path(__file__).resolve().parents[2]
CLIENTS = REPO / "tests" / "clients"
MARKER = ".kqs-complete"
# The Versity S3 Gateway: a real S3-compatible server, built with the Go module proxy.
VERSITYGW_MODULE = "github.com/versity/versitygw"
VERSITYGW_VERSION = "v1.8.0"
S3_CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
BUILD_TIMEOUT_S = 20 * 60.0


class ToolchainMissing(RuntimeError):
    """A program the test needs is not installed; the message names it."""


def cache_dir() -> Path:
    env = os.environ.get("KQS_CACHE_DIR")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "kqs").resolve()


def require_tool(*names: str) -> dict[str, str]:
    """The paths of `names`; a missing one fails the test under CI and skips it elsewhere."""
    found = {name: shutil.which(name) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        reason = f"{', '.join(missing)} not on PATH (needed to build and run this client)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return {name: path for name, path in found.items() if path is not None}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolchainMissing(f"{name} not on PATH")
    return path


def _hash(paths: list[Path], extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for path in sorted(paths):
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _sources(root: Path, *patterns: str) -> list[Path]:
    return [p for pattern in patterns for p in root.glob(pattern) if p.is_file()]


def _build_once(home: Path, build: Callable[[Path], None]) -> Path:
    """Run `build(scratch)` unless `home` holds a finished build; returns `home`."""
    if (home / MARKER).is_file():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    with file_lock.exclusive(home.parent / f"{home.name}.lock"):
        if (home / MARKER).is_file():
            return home
        for stale in home.parent.glob(f"{home.name}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if home.exists():
            shutil.rmtree(home)
        scratch = home.parent / f"{home.name}.partial-{os.getpid()}"
        scratch.mkdir()
        try:
            build(scratch)
            (scratch / MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
            os.rename(scratch, home)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    return home


def _run(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("wb") as out:
        result = subprocess.run(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({result.returncode}); {log}:\n{tail}")


# -- Java -------------------------------------------------------------------------------------


def java_classpath() -> str:
    """Compile tests/clients/java with Maven (once per source hash); its classpath."""
    root = CLIENTS / "java"
    home = cache_dir() / f"java-clients-{_hash(_sources(root, 'pom.xml', 'src/**/*.java'))}"

    def build(scratch: Path) -> None:
        _run(
            [
                _tool("mvn"),
                "-B",
                "-q",
                "-f",
                str(root / "pom.xml"),
                f"-Dkqs.build.dir={scratch / 'target'}",
                "compile",
                "dependency:copy-dependencies",
                f"-DoutputDirectory={scratch / 'deps'}",
                "-DincludeScope=runtime",
            ],
            root,
            home.parent / f"{home.name}-build.log",
        )
        os.rename(scratch / "target" / "classes", scratch / "classes")
        shutil.rmtree(scratch / "target")

    _tool("java")
    built = _build_once(home, build)
    return os.pathsep.join([str(built / "classes"), str(built / "deps" / "*")])


# -- Node -------------------------------------------------------------------------------------


def node_modules() -> Path:
    """`npm ci` of tests/clients/node's lock file (once per lock hash); its node_modules."""
    root = CLIENTS / "node"
    manifests = [root / "package.json", root / "package-lock.json"]
    home = cache_dir() / f"node-clients-{_hash(manifests)}"

    def build(scratch: Path) -> None:
        for manifest in manifests:
            shutil.copy2(manifest, scratch / manifest.name)
        _run(
            [_tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            scratch,
            home.parent / f"{home.name}-build.log",
        )

    _tool("node")
    return _build_once(home, build) / "node_modules"


# -- Go ---------------------------------------------------------------------------------------


def go_binary() -> Path:
    """`go build` of tests/clients/go (once per source hash); the program's path."""
    root = CLIENTS / "go"
    home = cache_dir() / f"go-clients-{_hash(_sources(root, 'go.mod', 'go.sum', '*.go'))}"

    def build(scratch: Path) -> None:
        _run(
            [_tool("go"), "build", "-o", str(scratch / "sqs-roundtrip"), "."],
            root,
            home.parent / f"{home.name}-build.log",
        )

    return _build_once(home, build) / "sqs-roundtrip"


# -- the S3 server ----------------------------------------------------------------------------


def _versitygw_home() -> Path:
    return cache_dir() / f"versitygw-{VERSITYGW_VERSION}"


def versitygw_built() -> bool:
    return (_versitygw_home() / MARKER).is_file()


def versitygw_binary() -> Path:
    """The Versity S3 Gateway, `go install`ed once from the Go module proxy."""
    home = _versitygw_home()

    def build(scratch: Path) -> None:
        _run(
            [_tool("go"), "install", f"{VERSITYGW_MODULE}/cmd/versitygw@{VERSITYGW_VERSION}"],
            scratch,
            home.parent / f"{home.name}-build.log",
            env={"GOBIN": str(scratch / "bin"), "GOFLAGS": "-buildvcs=false"},
        )

    return _build_once(home, build) / "bin" / "versitygw"


def s3_client(endpoint: str) -> Any:
    """boto3's S3 client of the test S3 server (path-style addressing)."""
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
        **S3_CREDENTIALS,
    )


def new_bucket(endpoint: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    s3_client(endpoint).create_bucket(Bucket=name)
    return name


def bucket_keys(endpoint: str, bucket: str) -> list[str]:
    listed = s3_client(endpoint).list_objects_v2(Bucket=bucket)
    return [item["Key"] for item in listed.get("Contents", [])]


@contextlib.contextmanager
def s3_server(root: Path, timeout_s: float = 60.0) -> Iterator[str]:
    """Run versitygw with its posix backend on `root` and a free loopback port; yield its URL."""
    binary = versitygw_binary()
    port = free_port()
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    log_path = root / "versitygw.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [
                str(binary),
                "--access",
                S3_CREDENTIALS["aws_access_key_id"],
                "--secret",
                S3_CREDENTIALS["aws_secret_access_key"],
                "--region",
                "us-east-1",
                "--port",
                f"127.0.0.1:{port}",
                "posix",
                str(data),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"versitygw exited: {log_path.read_text(errors='replace')}")
            try:
                urllib.request.urlopen(endpoint, timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # it answered (403 for an unsigned request): it is up
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"versitygw not answering on {endpoint}") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main() -> int:
    """Build every client program whose toolchain is here (``scripts/install test``)."""
    steps: list[tuple[str, Callable[[], object]]] = [
        ("Java clients (Maven)", java_classpath),
        ("Node clients (npm ci)", node_modules),
        ("Go clients (go build)", go_binary),
        (f"Versity S3 Gateway {VERSITYGW_VERSION} (go install)", versitygw_binary),
    ]
    failed = False
    for what, step in steps:
        started = time.monotonic()
        try:
            step()
        except ToolchainMissing as exc:
            print(f"==> {what}: skipped, {exc} (its tests will skip, or fail under CI)")  # noqa: T201
            continue
        except Exception as exc:  # noqa: BLE001 - report and go on; the tests fail with it
            print(f"==> {what}: FAILED: {exc}")  # noqa: T201
            failed = True
            continue
        print(f"==> {what}: ready ({time.monotonic() - started:.0f} s)")  # noqa: T201
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())


def json_lines(output: str, prefix: str) -> list[dict[str, Any]]:
    """The JSON objects a client program printed on lines starting `prefix` (e.g. "RESULT ")."""
    return [
        json.loads(line.removeprefix(prefix))
        for line in output.splitlines()
        if line.startswith(prefix)
    ]
