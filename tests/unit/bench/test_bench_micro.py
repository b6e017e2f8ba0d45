"""The request-path microbenchmark (`bench/micro`) at a tiny size: every request did its work.

No timing is asserted; what is checked is that the figures measure real work: every answer
was a success, the bodies sent came back, and the lease store's exact counts moved as each
action should (sent → visible, received → in flight, deleted → gone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.micro.__main__ as cli
from bench.micro import ab, instructions, run, wire
from bench.micro.standins import STORES


async def test_every_phase_of_the_microbenchmark_does_its_work_in_both_protocols_and_stores(
    tmp_path: Path,
) -> None:
    # Given a tiny size: 1 round of 3 requests per action after a warm-up of 2
    n, warmup = 3, 2

    # When it runs against both lease stores in both protocols
    result = await run.run(n, 1, warmup, work_dir=tmp_path)

    # Then each phase left the queue's exact counts where that action puts them
    expected = {
        "SendMessage": (n, 0, 0),
        "ReceiveMessage (1)": (0, n, 0),
        "ChangeMessageVisibility": (0, n, 0),
        "DeleteMessage": (0, 0, 0),
        "ReceiveMessage (empty)": (0, 0, 0),
        "SendMessageBatch (10)": (10 * n, 0, 0),
        "ReceiveMessage (10)": (0, 10 * n, 0),
        "ChangeMessageVisibilityBatch (10)": (0, 10 * n, 0),
        "DeleteMessageBatch (10)": (0, 0, 0),
    }
    for store in STORES:
        for protocol in wire.PROTOCOLS:
            for phase, counts in expected.items():
                assert result.checks.counts[(store, protocol, phase)] == counts
    # and every received body was the one sent, every batch entry succeeded
    queues = len(STORES) * len(wire.PROTOCOLS)
    sizes = n + warmup
    assert result.checks.bodies_received == queues * 11 * sizes
    assert result.checks.batch_entries_ok == queues * 30 * sizes
    assert result.checks.requests == queues * len(run.PHASES) * sizes
    assert result.checks.events_published > 0
    # and every message sent became one queue record that came back through ingest
    assert result.checks.queue_records == queues * 11 * sizes
    # and each measured (store, protocol, action) has one sample per request
    assert len(result.samples) == queues * len(run.PHASES)
    assert all(len(s.cpu_us) == n for s in result.samples.values())


def test_the_command_writes_markdown_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the results directory redirected to a temporary one
    monkeypatch.setattr(cli, "RESULTS", tmp_path)

    # When the command runs at a tiny size with the memory store only
    rc = cli.main(
        ["--iterations", "2", "--rounds", "1", "--warmup", "1", "--stores", "memory", "--out", "m"]
    )

    # Then both files are written, naming the actions measured
    assert rc == 0
    text = (tmp_path / "m.md").read_text()
    assert "DeleteMessageBatch (10)" in text
    assert "commit:" in text
    assert '"rows"' in (tmp_path / "m.json").read_text()


def test_the_ab_command_compares_two_trees_pair_by_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given this tree as its own base, and the results directory redirected
    monkeypatch.setattr(ab, "RESULTS", tmp_path)
    args = ["--base-src", str(ab.HERE), "--pairs", "1", "--iterations", "2", "--warmup", "1"]
    args += ["--stores", "memory", "--protocols", "json", "--out", "ab"]

    # When the A/B runs
    assert ab.main(args) == 0

    # Then every action has one ratio per pair, from two real runs
    rows = json.loads((tmp_path / "ab.json").read_text())["rows"]
    assert {r["action"] for r in rows} == {p.name for p in run.PHASES}
    assert all(len(r["ratio_per_pair"]) == 1 and r["ratio_median"] > 0 for r in rows)


@pytest.mark.parametrize("store", ["memory", "rocksdb"])
@pytest.mark.parametrize("protocol", wire.PROTOCOLS)
async def test_every_action_of_the_instruction_count_answers_200(protocol: str, store: str) -> None:
    # Given the requests that `bench.micro.instructions` has valgrind count
    # When each action runs twice (a failed request exits with its status; the cycle's
    # receive must get ten messages and its delete remove all ten)
    # Then all of them answered 200
    for action in (*instructions.ACTIONS, "sign10"):
        await instructions._inner(protocol, action, 2, store)
