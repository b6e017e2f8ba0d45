"""Opening the lease store at start-up, rebuilding it when the local copy is lost.

A healthy RocksDB directory is opened as is (the fast path: ingest resumes at each
partition's applied offset). A missing directory, or one RocksDB refuses to open (corrupt),
is rebuilt from `__kqs_leases` and the queue topics (`topology/rebuild.py`); a corrupt one is
kept aside as `leases.corrupt-<timestamp>` for inspection. The rebuild writes into
`leases.rebuilding` and renames it into place only when complete, so a crash during a rebuild
leaves no half-built store that would pass for a healthy one.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from gateway.common import limits
from lease_store.clock import Clock
from lease_store.keys import FORMAT_VERSION
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
from lease_store.types import CommitListener
from topology.catalog import QueueRecord, partition_keys
from topology.rebuild import RebuildTarget, rebuild_leases

log = logging.getLogger("kqs.leases")


def rebuild_targets(records: Iterable[QueueRecord]) -> list[RebuildTarget]:
    """Every partition of every live queue."""
    targets = []
    for record in records:
        if record.deleted:
            continue
        retention_s = int(
            record.attributes.get("MessageRetentionPeriod", limits.DEFAULT_RETENTION_S)
        )
        targets += [
            RebuildTarget(pk, record.topic, retention_s * 1000) for pk in partition_keys(record)
        ]
    return targets


async def open_lease_store(
    path: Path,
    bootstrap: str,
    records: Iterable[QueueRecord],
    clock: Clock,
    on_commit: CommitListener | None = None,
    young_ms: int = 0,
) -> LeaseStore:
    store = _open_healthy(path, on_commit, young_ms)
    if store is None:
        targets = rebuild_targets(records)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _rebuild_into, path, bootstrap, targets, clock.now_ms())
        store = LeaseStore(RocksKeyValueStore(path), on_commit, young_ms=young_ms)
    if store.upgrade_format():
        log.info(
            "lease store upgraded: its visibility indexes are now built in memory from the "
            "lease facts, and their old keys were dropped",
            extra={"format": FORMAT_VERSION},
        )
    return store


def _open_healthy(
    path: Path, on_commit: CommitListener | None, young_ms: int = 0
) -> LeaseStore | None:
    """The local store if RocksDB opens it; otherwise None, with a corrupt one moved aside."""
    if (path / "CURRENT").exists():
        try:
            return LeaseStore(RocksKeyValueStore(path), on_commit, young_ms=young_ms)
        except Exception as exc:  # noqa: BLE001 - rocksdict reports corruption as a bare Exception
            reason = f"corrupt: {exc}"
    elif path.exists() and any(path.iterdir()):
        reason = "corrupt: no CURRENT file"
    else:
        reason = "missing"
    if reason == "missing" and path.exists():
        path.rmdir()  # an empty directory
    elif path.exists():
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        path.rename(aside)
        log.warning(
            "lease store unusable, moved aside", extra={"path": str(aside), "reason": reason}
        )
    log.info("rebuilding the lease store", extra={"path": str(path), "reason": reason})
    return None


def _rebuild_into(path: Path, bootstrap: str, targets: list[RebuildTarget], now_ms: int) -> None:
    work = path.with_name(f"{path.name}.rebuilding")
    shutil.rmtree(work, ignore_errors=True)
    kv = RocksKeyValueStore(work)
    try:
        rebuild_leases(bootstrap, kv, targets, now_ms)
    finally:
        kv.close()
    work.rename(path)
