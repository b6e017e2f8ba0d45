"""`kqs serve`'s master key with the embedded broker: made on first start unless told not to
(`--no-master-key`), which goes with no other key (no processes started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.main import _with_own_master_key, main
from gateway.common.config import Settings


def test_the_embedded_brokers_gateway_makes_its_own_master_key(tmp_path: Path) -> None:
    settings = _with_own_master_key(Settings(data_dir=tmp_path, master_key_file=""))
    assert settings.master_key_file == str(tmp_path / "master.key")
    assert (tmp_path / "master.key").stat().st_size > 0


def test_told_not_to_it_makes_none_and_stores_in_clear_text(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, master_key_file="", no_master_key=True)
    assert _with_own_master_key(settings).master_key_file == ""
    assert not (tmp_path / "master.key").exists()


def test_no_master_key_with_a_key_file_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "given.key"
    argv = ["--no-master-key", "--master-key-file", str(key), "--data-dir", str(tmp_path)]
    assert main(["serve", *argv]) == 2
    assert "--no-master-key goes with neither" in capsys.readouterr().err
    assert not (tmp_path / "kafka").exists()  # no broker was started
