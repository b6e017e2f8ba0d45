"""The side-by-side report's ratios: which run is KQS in each pair."""

from __future__ import annotations

from typing import Any

from bench.sidebyside import report


def _run(server: str, pair: int, sent_per_s: float) -> dict[str, Any]:
    return {
        "workload": "b_batch",
        "server": server,
        "pair": pair,
        "result": {"sent_per_s": sent_per_s, "sent": sent_per_s * 60, "latency": {}},
        "resources": {"server_cpu_s": 60.0},
    }


def test_kqs_base_alone_against_a_peer_is_the_kqs_side_of_the_ratio() -> None:
    # A long run measures a `git archive` of the code (`--servers kqs-base,elasticmq`).
    runs = [
        _run("kqs-base", 1, 6000.0),
        _run("elasticmq", 1, 4000.0),
        _run("kqs-base", 2, 7500.0),
        _run("elasticmq", 2, 5000.0),
    ]
    sent = report.ratios(runs, "b_batch")["sent/s KQS/elasticmq"]
    assert sent == {"per_pair": [1.5, 1.5], "median": 1.5}
    assert not any(label.endswith("KQS/kqs-base") for label in report.ratios(runs, "b_batch"))


def test_with_this_tree_running_kqs_base_is_a_peer() -> None:
    runs = [_run("kqs", 1, 6000.0), _run("kqs-base", 1, 5000.0), _run("elasticmq", 1, 3000.0)]
    ratios = report.ratios(runs, "b_batch")
    assert ratios["sent/s KQS/kqs-base"]["per_pair"] == [1.2]
    assert ratios["sent/s KQS/elasticmq"]["per_pair"] == [2.0]


def test_the_machine_speed_around_each_run_is_reported() -> None:
    runs = [_run("kqs", 1, 6000.0), _run("elasticmq", 1, 4000.0)]
    runs[0]["resources"]["speed_probe_ms"] = [98.4, 120.0]
    runs[1]["resources"]["speed_probe_ms"] = [101.0, 99.0]
    meta = {
        "mode": "full",
        "started_utc": "s",
        "finished_utc": "f",
        "pairs": 1,
        "machine": "m",
        "load_avg_range": "0",
        "versions": {},
        "pinning": "p",
        "client": "c",
    }
    text = report.markdown(runs, meta)
    assert "pair 1 kqs 98 / 120; pair 1 elasticmq 101 / 99." in text


def test_the_speed_probe_times_a_loop_on_the_given_core() -> None:
    from bench.sidebyside import speed

    assert 0 < speed.probe_ms([0]) < 10_000
