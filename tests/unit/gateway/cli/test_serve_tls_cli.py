"""`kqs serve`'s HTTPS options between gateways: `--tls-peer-ca` is checked before anything
starts and handed to `--workers` children (no processes started here)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gateway.cli.main import _serve_parser, _worker_args, main
from tests.support.certificates import CertificateAuthority


def _serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    _serve_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["serve", *argv])


def test_a_peer_ca_without_https_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    assert main(["serve", "--tls-peer-ca", str(ca.cert), "--data-dir", str(tmp_path)]) == 2
    assert "--tls-peer-ca (KQS_TLS_PEER_CA) is for gateways serving HTTPS" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "kafka").exists()  # no broker was started


def test_a_peer_ca_that_is_no_certificate_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = CertificateAuthority(tmp_path / "ca").pem("localhost", ("localhost",), server=True)
    not_pem = tmp_path / "peer-ca.pem"
    not_pem.write_text("no certificate here\n")
    argv = ["--tls-cert", str(server.cert), "--tls-key", str(server.key)]
    argv += ["--tls-peer-ca", str(not_pem), "--data-dir", str(tmp_path)]
    assert main(["serve", *argv]) == 2
    assert f"--tls-peer-ca {not_pem}" in capsys.readouterr().err


def test_workers_get_the_https_options_of_their_supervisor(tmp_path: Path) -> None:
    args = _serve_args(
        "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-peer-ca", "ca.pem", "--workers", "2"
    )
    passed = _worker_args(args)
    for option, value in (("--tls-cert", "c.pem"), ("--tls-key", "k.pem")):
        assert passed[passed.index(option) + 1] == value
    assert passed[passed.index("--tls-peer-ca") + 1] == "ca.pem"
