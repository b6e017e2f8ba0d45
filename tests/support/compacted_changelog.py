"""A recording listener standing in for `__kqs_leases`: it keeps the latest value per key, as
compaction would, and replays that into a rebuild of a lost lease store."""

from __future__ import annotations

from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore
from lease_store.rebuild import LeaseRebuild, PartitionPlan
from lease_store.records import LeaseFact, StoredMessage
from lease_store.store import LeaseStore
from lease_store.types import PartitionState
from tests.support.builders import DAY_MS

RETENTION_MS = 4 * DAY_MS

Log = list[tuple[int, StoredMessage]]


class CompactedChangelog:
    """What `__kqs_leases` keeps after compaction: the latest value per key, in key order."""

    def __init__(self) -> None:
        self.latest: dict[tuple[PartitionKey, int | None], LeaseFact | int | None] = {}
        self.commits: list[tuple[PartitionKey, dict[int, LeaseFact | None]]] = []

    def on_commit(
        self, pk: PartitionKey, changes: dict[int, bytes | None], st: PartitionState
    ) -> None:
        facts = {
            o: LeaseFact.decode(raw) if raw is not None else None for o, raw in changes.items()
        }
        self.commits.append((pk, facts))
        for offset, fact in facts.items():
            self.latest[(pk, offset)] = fact
        if st.purged_before_offset:
            self.latest[(pk, None)] = st.purged_before_offset

    def replay_into(self, rebuild: LeaseRebuild) -> None:
        for (pk, offset), value in self.latest.items():
            if offset is None:
                assert isinstance(value, int)
                rebuild.apply_purge_watermark(pk, value)
            else:
                assert not isinstance(value, int)
                rebuild.apply_change(pk, offset, value)


def rebuilt(
    kv: KeyValueStore,
    changelog: CompactedChangelog,
    logs: dict[PartitionKey, Log],
    now_ms: int,
    log_start: int = 0,
) -> LeaseStore:
    rebuild = LeaseRebuild(
        kv, [PartitionPlan(pk, RETENTION_MS, log_start) for pk in logs], now_ms, batch_size=3
    )
    changelog.replay_into(rebuild)
    for pk, log in logs.items():
        kept = [(offset, m) for offset, m in log if offset >= log_start]
        rebuild.replay(pk, kept[:2])  # in two calls, as batches arrive
        rebuild.replay(pk, kept[2:])
        rebuild.finish(pk, log[-1][0] + 1 if log else log_start)
    return LeaseStore(kv)
