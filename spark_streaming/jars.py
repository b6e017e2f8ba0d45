"""Spark's Kafka source and sink jars, resolved from Maven Central once into a local cache.

PySpark from PyPI ships Spark itself but not its Kafka connector. Spark's own answer,
``spark.jars.packages``, resolves through Ivy on every session start and needs the network
each time; instead, like the broker jars in ``topology/broker.py``, this module runs Maven
once (``dependency:copy-dependencies``) and passes the local files with ``spark.jars``::

    <cache>/spark-kafka-<pyspark version>/jars/*.jar   the connector and what it needs
    <cache>/spark-kafka-<pyspark version>/.kqs-complete  marker, written last (JSON list)

Jars that PySpark already ships (hadoop-client, snappy, lz4, zstd, slf4j, ...) are left out,
so the connector runs against Spark's own copies and no class exists twice on the classpath.
The connector's version always equals the installed PySpark's: a Spark 4.3 job cannot load
a 4.2 connector.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("kqs.analytics.jars")

SCALA_BINARY_VERSION = "2.13"
CONNECTOR = f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
FETCH_TIMEOUT_S = 30 * 60.0
_MARKER = ".kqs-complete"
# "<artifact>-<version>[-<classifier>].jar", where the version is one or more dash-separated
# parts that start with a digit ("zstd-jni-1.5.6-9") and the artifact may hold digits after
# a dash itself ("spark-sql-kafka-0-10_2.13", "log4j-1.2-api").
_ARTIFACT = re.compile(r"^(?P<artifact>.+?)(?:-\d[^-_]*)+(?:-[A-Za-z][\w.]*)*\.jar$")


class JarsError(RuntimeError):
    """The connector jars could not be resolved; the message says what to do."""


def spark_version() -> str:
    import pyspark

    version: str = pyspark.__version__
    return version


def default_cache_dir() -> Path:
    """``$KQS_CACHE_DIR`` or ``~/.cache/kqs``, shared with the broker jars."""
    env = os.environ.get("KQS_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kqs"


def connector_home(cache_dir: Path | None = None, version: str | None = None) -> Path:
    base = (cache_dir or default_cache_dir()).expanduser().resolve()
    return base / f"spark-kafka-{version or spark_version()}"


def cached_jars(cache_dir: Path | None = None, version: str | None = None) -> list[Path] | None:
    """The resolved jars, or None when ``fetch`` has not completed for this version."""
    home = connector_home(cache_dir, version)
    if not (home / _MARKER).is_file():
        return None
    return sorted((home / "jars").glob("*.jar"))


def fetch(cache_dir: Path | None = None, version: str | None = None) -> list[Path]:
    """Make sure the connector jars of ``version`` (default: installed PySpark) are cached.

    Only the first call downloads. Maven writes into a scratch directory that is renamed
    into place once complete, so an interrupted fetch is never taken for a finished one.
    Raises JarsError when Maven or Java is missing or Maven fails.
    """
    version = version or spark_version()
    jars = cached_jars(cache_dir, version)
    if jars is not None:
        return jars
    home = connector_home(cache_dir, version)
    home.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(home.parent / f"{home.name}.lock"):
        jars = cached_jars(cache_dir, version)
        if jars is None:  # nobody finished it while we waited for the lock
            _download(home, version)
            jars = cached_jars(cache_dir, version)
    assert jars is not None
    return jars


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(home: Path, version: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsError(
            "Apache Maven ('mvn') is needed once to download Spark's Kafka connector from "
            "Maven Central; install it (e.g. `apt-get install maven`) and retry"
        )
    for stale in home.parent.glob(f"{home.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if home.exists():
        shutil.rmtree(home)
    scratch = home.parent / f"{home.name}.partial-{os.getpid()}"
    (scratch / "all").mkdir(parents=True)
    mvn_log = home.parent / f"{home.name}-fetch.log"
    logger.info(
        "resolving org.apache.spark:%s:%s from Maven Central into %s (first time only)",
        CONNECTOR,
        version,
        home,
    )
    began = time.monotonic()
    try:
        (scratch / "pom.xml").write_text(_pom(version), encoding="utf-8")
        (scratch / "settings.xml").write_text(_MAVEN_SETTINGS, encoding="utf-8")
        _run_maven(mvn, scratch, mvn_log, version)
        kept, skipped = _keep_missing_from_pyspark(scratch / "all", scratch / "jars")
        shutil.rmtree(scratch / "all")
        if not any(name.startswith(f"{CONNECTOR}-") for name in kept):
            raise JarsError(f"maven finished but {CONNECTOR} is missing; see {mvn_log}")
        (scratch / _MARKER).write_text(
            json.dumps({"spark_version": version, "jars": kept, "provided_by_pyspark": skipped})
            + "\n",
            encoding="utf-8",
        )
        os.rename(scratch, home)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    logger.info(
        "spark kafka connector ready jars=%d (skipped %d that pyspark ships) elapsed=%.1fs",
        len(kept),
        len(skipped),
        time.monotonic() - began,
    )


def _pom(version: str) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by kqs (spark_streaming/jars.py): only used to resolve Spark's Kafka connector. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kqs.local</groupId>
  <artifactId>spark-kafka-libs</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>{CONNECTOR}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


# Spark's parent pom declares a Google Cloud mirror of Maven Central as an extra repository;
# where only Maven Central itself is reachable, resolving through it fails. Point that
# repository id back at Maven Central. Passed as the *global* settings file, so the user's
# own ~/.m2/settings.xml (a corporate mirror, say) still applies on top.
_MAVEN_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <mirrors>
    <mirror>
      <id>kqs-central-for-gcs</id>
      <mirrorOf>gcs-maven-central-mirror</mirrorOf>
      <url>https://repo.maven.apache.org/maven2</url>
    </mirror>
  </mirrors>
</settings>
"""


def _run_maven(mvn: str, project: Path, mvn_log: Path, version: str) -> None:
    cmd = [
        mvn,
        "-B",
        "-q",
        "-gs",
        str(project / "settings.xml"),
        "-f",
        str(project / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={project / 'all'}",
        "-DincludeScope=runtime",
    ]
    try:
        with mvn_log.open("wb") as out:
            result = subprocess.run(
                cmd,
                cwd=project,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=FETCH_TIMEOUT_S,
                check=False,
            )
    except subprocess.TimeoutExpired as exc:
        raise JarsError(
            f"maven did not resolve Spark's Kafka connector within {FETCH_TIMEOUT_S:.0f}s; "
            f"check network access to Maven Central and see {mvn_log}"
        ) from exc
    if result.returncode != 0:
        raise JarsError(
            f"maven failed to resolve {CONNECTOR}:{version} (exit {result.returncode}); "
            f"check network access to Maven Central and see {mvn_log}"
        )


def artifact_name(jar_name: str) -> str:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients`` (the name without version)."""
    match = _ARTIFACT.match(jar_name)
    return match.group("artifact") if match else jar_name.removesuffix(".jar")


def _keep_missing_from_pyspark(resolved: Path, target: Path) -> tuple[list[str], list[str]]:
    """Copy into ``target`` the resolved jars whose artifact PySpark does not ship."""
    shipped = {artifact_name(p.name) for p in pyspark_jars_dir().glob("*.jar")}
    target.mkdir()
    kept: list[str] = []
    skipped: list[str] = []
    for jar in sorted(resolved.glob("*.jar")):
        if artifact_name(jar.name) in shipped:
            skipped.append(jar.name)
        else:
            shutil.copy2(jar, target / jar.name)
            kept.append(jar.name)
    return kept, skipped


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"
