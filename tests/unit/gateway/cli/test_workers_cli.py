"""`kqs serve --workers`: the option's values, and where a pool worker says it can be reached
(no processes started here; `tests/e2e/several_gateways/test_e2e_workers.py` runs the pool)."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.cli.main import _private_url, _worker_count, main
from gateway.cluster.workers import cpu_count
from gateway.common.config import Settings
from gateway.iam.config import ConfigError


def test_workers_takes_a_count_or_auto() -> None:
    assert _worker_count("1") == 1
    assert _worker_count("3") == 3
    assert _worker_count("auto") == cpu_count() >= 1
    for bad in ("0", "-2", "two", ""):
        with pytest.raises(ConfigError, match="give a number of processes"):
            _worker_count(bad)


def test_kqs_serve_refuses_a_bad_worker_count_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--workers", "none", "--data-dir", str(tmp_path)]) == 2
    assert "--workers 'none'" in capsys.readouterr().err
    assert not (tmp_path / "kafka").exists()  # no broker was started


def test_a_worker_is_reached_on_its_own_port_at_the_advertised_or_listening_host() -> None:
    with socket.socket() as private:
        private.bind(("127.0.0.1", 0))
        port = private.getsockname()[1]
        settings = replace(Settings(), host="127.0.0.1", port=9324)
        assert _private_url(settings, private) == f"http://127.0.0.1:{port}"
        anywhere = replace(settings, host="0.0.0.0")
        assert _private_url(anywhere, private) == f"http://127.0.0.1:{port}"
        advertised = replace(anywhere, advertised_url="https://gw-3.internal:9324/")
        assert _private_url(advertised, private) == f"https://gw-3.internal:{port}"
