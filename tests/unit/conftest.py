"""Unit-tier fixtures: the lease store's, one set run per backend via `on_every_backend`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lease_store.clock import ManualClock
from lease_store.kv import KeyValueStore
from lease_store.store import LeaseStore
from tests.support.builders import T0, open_kv


@pytest.fixture
def kv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyValueStore]:
    store = open_kv(request.param, tmp_path / "kv")
    yield store
    store.close()


@pytest.fixture
def store(kv: KeyValueStore) -> LeaseStore:
    return LeaseStore(kv)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)
