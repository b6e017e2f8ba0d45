"""Which gateways a starting one must not serve beside (`gateway/cluster/group_check.py`),
from the members the presence and ingest groups list (a stand-in admin answers)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.cluster import group_check
from gateway.cluster.group_check import SharedCluster, check_alone, others_in_the_way
from topology.names import INGEST_GROUP
from topology.presence import PRESENCE_GROUP, client_id, parse_member


class Members:
    """The groups' members as `TopicAdmin.group_members` lists them."""

    def __init__(self, presence: list[str], ingest: list[str] | None = None) -> None:
        self.groups = {PRESENCE_GROUP: presence, INGEST_GROUP: ingest or []}

    async def group_members(self, group: str) -> list[str]:
        return list(self.groups.get(group, []))


def member(mode: str, gateway: str, host: str = "/127.0.0.1") -> str:
    return f"{client_id(mode, gateway)}@{host}"


def others(admin: Members, mode: str, gateway: str = "me") -> list[str]:
    return asyncio.run(others_in_the_way(admin, mode, gateway))  # type: ignore[arg-type]


def test_a_member_names_its_mode_and_gateway_and_other_consumers_are_no_gateways() -> None:
    parsed = parse_member(member("group", "abc", "/10.0.0.7"))
    assert parsed is not None
    assert (parsed.mode, parsed.gateway, parsed.host) == ("group", "abc", "/10.0.0.7")
    assert parse_member("rdkafka@/127.0.0.1") is None
    assert parse_member("kqs/all@/127.0.0.1") is None


def test_a_single_gateway_meets_every_other_gateway_but_itself() -> None:
    admin = Members([member("all", "me"), member("all", "b"), member("group", "c")])
    assert len(others(admin, "all")) == 2
    assert others(Members([member("all", "me")]), "all") == []


def test_a_single_gateway_meets_group_mode_gateways_of_the_ingest_group_too() -> None:
    assert others(Members([], ingest=["rdkafka@/127.0.0.1"]), "all") == [
        "rdkafka@/127.0.0.1 (group)"
    ]


def test_a_group_mode_gateway_meets_only_single_gateways() -> None:
    admin = Members([member("group", "b"), member("group", "c")], ingest=["x@/h"])
    assert others(admin, "group") == []
    assert others(Members([member("all", "b")]), "group") == [str(parse_member(member("all", "b")))]


def test_refused_with_the_setting_named_after_waiting_for_dead_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(group_check, "STALE_MEMBER_WAIT_S", 0.2)
    monkeypatch.setattr(group_check, "_RECHECK_S", 0.05)
    admin = Members([member("all", "b")])
    with pytest.raises(SharedCluster, match="KQS_PARTITION_OWNERSHIP=group") as refused:
        asyncio.run(check_alone(admin, "all", "me", "refuse"))  # type: ignore[arg-type]
    assert "b (all)" in str(refused.value)


def test_a_dead_member_whose_session_ends_meanwhile_lets_it_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(group_check, "_RECHECK_S", 0.01)
    admin = Members([member("all", "dead")])

    async def session_ends() -> list[str]:
        checking = asyncio.ensure_future(check_alone(admin, "all", "me", "refuse"))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        admin.groups[PRESENCE_GROUP] = []
        return await checking

    assert asyncio.run(session_ends()) == []


def test_warn_serves_beside_them_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    admin = Members([member("group", "b")], ingest=["y@/h"])
    found = asyncio.run(check_alone(admin, "all", "me", "warn"))  # type: ignore[arg-type]
    assert len(found) == 2
    assert any("KQS_PARTITION_OWNERSHIP=group" in r.getMessage() for r in caplog.records)
