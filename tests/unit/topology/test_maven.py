"""The cached Maven fetch (`topology/embedded/maven.py`), with a stand-in `mvn` on PATH.

The stand-in is a shell script that does what `dependency:copy-dependencies` does to the
file system (jars into `-DoutputDirectory`), records each call, and can fail like Maven.
The real Maven runs in the broker and Spark connector fetches of the other suites.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topology.embedded import maven

FAKE_MVN = """#!/bin/sh
echo "$@" >> "{calls}"
if [ -f "{fail}" ]; then
  echo "[ERROR] Failed to collect dependencies: could not reach repo"
  exit 1
fi
for arg in "$@"; do
  case "$arg" in
    -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}" ;;
  esac
done
mkdir -p "$out"
touch "$out/thing-1.2.3.jar" "$out/helper-4.5.jar"
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    script.write_text(FAKE_MVN.format(calls=tmp_path / "calls", fail=tmp_path / "fail"))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    yield tmp_path


def _calls(root: Path) -> list[str]:
    path = root / "calls"
    return path.read_text().splitlines() if path.exists() else []


def _record_jars(scratch: Path) -> dict[str, Any]:
    return {"jars": sorted(p.name for p in (scratch / "libs").glob("*.jar"))}


def test_a_fetch_leaves_the_jars_and_a_marker_and_runs_maven_once(fake_mvn: Path) -> None:
    # Given an empty cache
    home = fake_mvn / "cache" / "thing-1"
    # When the jars are fetched twice
    for _ in range(2):
        assert maven.fetch_once(home, "<project/>", _record_jars, what="the thing") == home
    # Then they are there, the marker says what arrived, and Maven ran only the first time
    assert sorted(p.name for p in (home / "libs").glob("*.jar")) == [
        "helper-4.5.jar",
        "thing-1.2.3.jar",
    ]
    assert maven.marker(home) == {"jars": ["helper-4.5.jar", "thing-1.2.3.jar"]}
    assert json.loads((home / maven.MARKER).read_text())["jars"]
    assert len(_calls(fake_mvn)) == 1
    assert "copy-dependencies" in _calls(fake_mvn)[0]


def test_a_fetch_whose_check_fails_leaves_nothing_that_looks_finished(fake_mvn: Path) -> None:
    home = fake_mvn / "cache" / "thing-1"

    def refuse(scratch: Path) -> dict[str, Any]:
        raise RuntimeError("the wanted jar is missing")

    with pytest.raises(RuntimeError, match="missing"):
        maven.fetch_once(home, "<project/>", refuse, what="the thing")
    assert not home.exists()
    assert not list(home.parent.glob("thing-1.partial-*"))
    # And the next fetch starts over and finishes
    maven.fetch_once(home, "<project/>", _record_jars, what="the thing")
    assert maven.is_complete(home)


def test_a_home_without_its_marker_is_fetched_again(fake_mvn: Path) -> None:
    home = fake_mvn / "cache" / "thing-1"
    (home / "libs").mkdir(parents=True)
    (home / "libs" / "half-written.jar").touch()
    maven.fetch_once(home, "<project/>", _record_jars, what="the thing")
    assert not (home / "libs" / "half-written.jar").exists()
    assert len(_calls(fake_mvn)) == 1


def test_a_maven_failure_names_its_error_line_and_the_log(fake_mvn: Path) -> None:
    (fake_mvn / "fail").touch()
    home = fake_mvn / "cache" / "thing-1"
    with pytest.raises(maven.MavenError) as excinfo:
        maven.fetch_once(home, "<project/>", _record_jars, what="the thing")
    message = str(excinfo.value)
    assert "maven failed to resolve the thing" in message
    assert "could not reach repo" in message
    assert "thing-1-fetch.log" in message
    assert not maven.is_complete(home)


def test_without_maven_the_error_says_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(maven.MavenError, match="install it"):
        maven.fetch_once(tmp_path / "thing-1", "<project/>", _record_jars, what="the thing")


def test_a_settings_file_is_passed_as_the_global_settings(fake_mvn: Path) -> None:
    home = fake_mvn / "cache" / "thing-1"
    maven.fetch_once(home, "<project/>", _record_jars, what="the thing", settings_xml="<settings/>")
    assert "-gs" in _calls(fake_mvn)[0].split()
