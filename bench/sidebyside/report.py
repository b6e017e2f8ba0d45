"""Tables and ratios from the runs: Markdown for people, JSON for tools.

Each workload ran once per server per pair, in alternation (KQS, ElasticMQ, fauxqs, ..., KQS, ...).
Per workload the table shows each server's median over the pairs; the ratio table shows
KQS/ElasticMQ and KQS/moto computed within each pair (same pair = adjacent in time) and the
median of those per-pair ratios.
"""

from __future__ import annotations

import statistics
from typing import Any

SERVERS = ("kqs", "kqs-w2", "kqs-w4", "kqs-base", "elasticmq", "fauxqs", "fauxqs-sqlite", "moto")
# `KQS/kqs-w2`: one gateway process over two (`kqs serve --workers 2`); below 1, two are faster.
PEERS = ("elasticmq", "fauxqs", "fauxqs-sqlite", "moto", "kqs-base", "kqs-w2", "kqs-w4")
TITLES = {
    "a_single": "(a) producer/consumer, single calls (SendMessage; ReceiveMessage + DeleteMessage)",
    "b_batch": "(b) producer/consumer, batch calls (SendMessageBatch; ReceiveMessage×10 + DeleteMessageBatch)",
    "c_wake": "(c) long-poll wake latency (send acknowledged → parked 20 s receive returns)",
    "d_backlog": "(d) backlog drain (fill with SendMessageBatch, then ReceiveMessage×10 + DeleteMessageBatch)",
    "f_fifo": "(f) FIFO queue: SendMessageBatch of 10 per message group; ReceiveMessage×10 + "
    "DeleteMessageBatch; order checked per group",
    "peak_a": "(o, step 1) closed-loop peak of each server: workload (a) once, before the pairs",
    "o_open": "(o) open loop: a fixed offered rate of SendMessage and of ReceiveMessage + DeleteMessage, "
    "latency from each operation's scheduled time",
}
# Per workload: (metric key, label, higher is better)
RATIO_METRICS: dict[str, list[tuple[str, str, bool]]] = {
    "a_single": [
        ("sent_per_s", "sent/s", True),
        ("received_deleted_per_s", "recv+del/s", True),
        ("cpu_ms_per_msg", "server CPU ms/msg", False),
    ],
    "b_batch": [
        ("sent_per_s", "sent/s", True),
        ("received_deleted_per_s", "recv+del/s", True),
        ("cpu_ms_per_msg", "server CPU ms/msg", False),
    ],
    # Wake after the ack is ~0 or negative for every server, so only the issued→wake ratio.
    "c_wake": [
        ("send_to_wake_p50_ms", "send issued → wake p50 ms", False),
        ("send_to_wake_p99_ms", "send issued → wake p99 ms", False),
    ],
    "d_backlog": [
        ("sent_per_s", "fill msg/s", True),
        ("received_deleted_per_s", "drain msg/s", True),
    ],
    "f_fifo": [
        ("sent_per_s", "sent/s", True),
        ("received_deleted_per_s", "recv+del/s", True),
        ("cpu_ms_per_msg", "server CPU ms/msg", False),
    ],
    "o_open": [
        ("send_p50_ms", "send p50 ms", False),
        ("send_p99_ms", "send p99 ms", False),
        ("recv_del_p50_ms", "receive+delete p50 ms", False),
        ("recv_del_p99_ms", "receive+delete p99 ms", False),
    ],
}


def _med(values: list[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return round(statistics.median(clean), 2) if clean else None


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _lat(runs: list[dict[str, Any]], action: str) -> str:
    parts = []
    for key in ("p50_ms", "p99_ms", "p999_ms"):
        parts.append(_fmt(_med([r["result"]["latency"].get(action, {}).get(key) for r in runs])))
    return " / ".join(parts)


def _get(run: dict[str, Any], key: str) -> Any:
    if key == "cpu_ms_per_msg":
        # Server CPU per message moved (sent + received-and-deleted): the efficiency figure,
        # which a machine shared with other work disturbs less than throughput.
        moved = (run["result"].get("sent") or 0) + (run["result"].get("received_deleted") or 0)
        return round(run["resources"]["server_cpu_s"] * 1000 / moved, 3) if moved else None
    if key in run["result"]:
        return run["result"][key]
    return run["resources"].get(key)


def ratios(runs: list[dict[str, Any]], workload: str) -> dict[str, Any]:
    """Per pair KQS/peer for each ratio metric, and the median over pairs.

    KQS is `kqs` (this tree), or `kqs-base` when it runs alone against the peers: a long run
    measures a `git archive` of the code so that the working tree stays free to change."""
    out: dict[str, Any] = {}
    by_pair: dict[int, dict[str, dict[str, Any]]] = {}
    for run in runs:
        if run["workload"] == workload:
            by_pair.setdefault(run["pair"], {})[run["server"]] = run
    present = {run["server"] for run in runs}
    subject = "kqs" if "kqs" in present else "kqs-base"
    for key, label, _ in RATIO_METRICS.get(workload, []):
        for peer in (p for p in PEERS if p in present and p != subject):
            per_pair: list[float | None] = []
            for pair in sorted(by_pair):
                kqs, other = by_pair[pair].get(subject), by_pair[pair].get(peer)
                value = None
                if kqs and other:
                    a, b = _get(kqs, key), _get(other, key)
                    if a is not None and b:
                        value = round(a / b, 3)
                per_pair.append(value)
            out[f"{label} KQS/{peer}"] = {"per_pair": per_pair, "median": _med(per_pair)}
    return out


def _speed_probes(wruns: list[dict[str, Any]]) -> list[str]:
    """The machine's speed around each run (`speed.py`), where the runs were probed."""
    probed = [r for r in wruns if r["resources"].get("speed_probe_ms")]
    if not probed:
        return []
    each = "; ".join(
        f"pair {r['pair']} {r['server']} {' / '.join(f'{v:.0f}' for v in r['resources']['speed_probe_ms'])}"
        for r in sorted(probed, key=lambda r: (r["pair"], SERVERS.index(r["server"])))
    )
    return [
        "Machine speed probe, ms for a fixed Python loop on the server cores before / after "
        f"each run (lower is faster; bench/sidebyside/speed.py): {each}.",
        "",
    ]


def markdown(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    present = [s for s in SERVERS if any(r["server"] == s for r in runs)]
    lines = [f"# Side-by-side: {', '.join(present)} ({meta['mode']})", ""]
    if meta.get("label"):
        lines += [f"**{meta['label']}**", ""]
    lines += [
        f"- when: {meta['started_utc']} – {meta['finished_utc']} UTC; pairs: {meta['pairs']}",
        f"- machine: {meta['machine']}",
        f"- load average (1 min) at each run: {meta['load_avg_range']}",
        f"- versions: {', '.join(meta['versions'].values())}",
        f"- pinning: {meta['pinning']}",
        f"- client: {meta['client']}",
        f"- warm-up before each measured run: {meta.get('warmup_s', 0)} s of unmeasured "
        "single + batch producer/consumer load on a scratch queue (every server alike)",
        "",
    ]
    workloads = [w for w in TITLES if any(r["workload"] == w for r in runs)]
    for workload in workloads:
        wruns = [r for r in runs if r["workload"] == workload]
        lines += [f"## {TITLES[workload]}", ""]
        params = wruns[0]["result"].get("params", {})
        lines += ["params: " + ", ".join(f"{k}={v}" for k, v in params.items()), ""]
        if workload == "o_open":
            header = (
                "| server | offered msg/s | achieved msg/s sent / recv+del "
                "| send p50 / p99 / p999 ms | receive+delete p50 / p99 / p999 ms "
                "| empty receives | unfinished | server CPU s "
                "| server CPU ms/msg | peak RSS MB | client lag p99 ms |"
            )
            lines += [header, "|" + "---|" * 11]
        elif workload == "c_wake":
            header = (
                "| server | woken/missed | wake p50 ms | wake p99 ms | wake max ms "
                "| send issued → wake p50 / p99 ms | send p50 / p99 / p999 ms | server CPU s "
                "| peak RSS MB |"
            )
            lines += [header, "|" + "---|" * 9]
        else:
            header = (
                "| server | sent | msg/s sent | msg/s recv+del | send p50 / p99 / p999 ms "
                "| receive p50 / p99 / p999 ms | delete p50 / p99 / p999 ms | server CPU s "
                "| server CPU ms/msg | peak RSS MB | client core share |"
            )
            lines += [header, "|" + "---|" * 11]
        for server in SERVERS:
            sruns = [r for r in wruns if r["server"] == server]
            if not sruns:
                continue

            def med(key: str, s: list[dict[str, Any]] = sruns) -> str:
                return _fmt(_med([_get(r, key) for r in s]))

            single = workload in ("a_single", "peak_a")
            send, delete = (
                ("SendMessage", "DeleteMessage")
                if single
                else ("SendMessageBatch", "DeleteMessageBatch")
            )
            if workload == "o_open":

                def trio(prefix: str, s: list[dict[str, Any]] = sruns) -> str:
                    keys = (f"{prefix}_p50_ms", f"{prefix}_p99_ms", f"{prefix}_p999_ms")
                    return " / ".join(_fmt(_med([_get(r, k) for r in s])) for k in keys)

                rate = sruns[0]["result"]["params"]["rate_per_s"]
                lines.append(
                    f"| {server} | {_fmt(rate)} | {med('sent_per_s')} / {med('received_deleted_per_s')} "
                    f"| {trio('send')} | {trio('recv_del')} "
                    f"| {med('empty_receives')} | {med('unfinished_after_grace')} "
                    f"| {med('server_cpu_s')} | {med('cpu_ms_per_msg')} | {med('server_peak_rss_mb')} "
                    f"| {med('client_lag_p99_ms')} |"
                )
            elif workload == "c_wake":
                woken = sum(r["result"]["woken"] for r in sruns)
                missed = sum(r["result"]["missed"] for r in sruns)
                lines.append(
                    f"| {server} | {woken}/{missed} | {med('wake_p50_ms')} | {med('wake_p99_ms')} "
                    f"| {med('wake_max_ms')} | {med('send_to_wake_p50_ms')} / {med('send_to_wake_p99_ms')} "
                    f"| {_lat(sruns, 'SendMessage')} | {med('server_cpu_s')} "
                    f"| {med('server_peak_rss_mb')} |"
                )
            else:
                lines.append(
                    f"| {server} | {med('sent')} | {med('sent_per_s')} | {med('received_deleted_per_s')} "
                    f"| {_lat(sruns, send)} | {_lat(sruns, 'ReceiveMessage')} | {_lat(sruns, delete)} "
                    f"| {med('server_cpu_s')} | {med('cpu_ms_per_msg')} | {med('server_peak_rss_mb')} "
                    f"| {med('client_core_share')} |"
                )
        lines.append("")
        workload_ratios = ratios(runs, workload)
        if workload_ratios:
            lines += ["| ratio | per pair | median |", "|---|---|---|"]
        for label, value in workload_ratios.items():
            per = ", ".join(_fmt(v) for v in value["per_pair"])
            lines.append(f"| {label} | {per} | {_fmt(value['median'])} |")
        lines.append("")
        lines += _speed_probes(wruns)
        if workload == "f_fifo":
            for r in wruns:
                res = r["result"]
                lines.append(
                    f"- pair {r['pair']} {r['server']}: {res['out_of_order']} out of order, "
                    f"{res['groups_seen']} groups seen"
                )
            lines.append("")
        if workload == "d_backlog":
            for r in wruns:
                res = r["result"]
                if not res.get("complete"):
                    lines.append(
                        f"- pair {r['pair']} {r['server']}: reached {res['sent']:,} sent / "
                        f"{res['received_deleted']:,} drained of {res['params']['requested']:,} "
                        "(phase cap hit)"
                    )
            lines.append("")
    scale = [r for r in runs if r["workload"] == "e_scale"]
    if scale:
        p = scale[0]["result"]["params"]
        lines += [
            "## (e) scale profile (seed 004: 100 users × 100 queues × 1,000 messages, 500 in flight per queue)",
            "",
            f"asked: {p['users']} users × {p['queues_per_user']} queues × "
            f"{p['messages_per_queue']:,} messages, {p['in_flight_per_queue']} in flight per queue "
            f"(concurrency {p['concurrency']}, phase cap {p['phase_cap_s']} s)",
            "",
            "| server | queues reached | msgs sent | in flight held | create queues/s | send msg/s | receive msg/s | phase s (create / send / hold) | server CPU s | peak RSS MB | disk MB | errors |",
            "|" + "---|" * 12,
        ]
        for r in scale:
            res, ph = r["result"], r["result"]["phases"]
            seconds = " / ".join(
                _fmt(ph[k]["seconds"]) for k in ("create_queues", "send", "receive_in_flight")
            )
            lines.append(
                f"| {r['server']} | {res['queues_created']:,} | {res['messages_sent']:,} "
                f"| {res['messages_in_flight']:,} | {_fmt(ph['create_queues']['per_s'])} "
                f"| {_fmt(ph['send']['per_s'])} | {_fmt(ph['receive_in_flight']['per_s'])} "
                f"| {seconds} "
                f"| {_fmt(r['resources']['server_cpu_s'])} | {_fmt(r['resources']['server_peak_rss_mb'])} "
                f"| {_fmt(r['resources'].get('disk_mb'))} "
                f"| {sum(res['errors']['counts'].values())} |"
            )
        lines.append("")
        for r in scale:
            counts = r["result"].get("sample_counts_visible_inflight") or []
            tally: dict[str, int] = {}
            for visible, in_flight in counts:
                key = f"({visible:,} visible, {in_flight:,} in flight)"
                tally[key] = tally.get(key, 0) + 1
            lines.append(
                f"{r['server']}: the server's own counts on {len(counts)} sampled queues: "
                + ", ".join(f"{key} × {n}" for key, n in tally.items())
            )
        lines.append("")
    lines += [
        "CPU seconds and peak RSS are of each server's whole process tree (KQS: gateway + "
        "broker JVM). Latencies are per request as seen by the client. 'client core share' is the "
        "load generator's CPU time over wall time: near 1.0 the client, not the server, was the limit. "
        "Wake latency: from the SendMessage response to the parked receive's response; it is "
        "near zero or negative when a server answers the parked receive before the send. "
        "Open loop (o): every server is offered the same rate; latencies run from each "
        "operation's scheduled time, so queueing behind a slow answer counts (coordinated-omission "
        "safe); receive+delete is a ReceiveMessage of 1 (1 s long poll) and the DeleteMessage of "
        "what it got, scheduled half a send period after each send; 'client lag' is how late the load generator issued operations (its own limit).",
        "",
    ]
    return "\n".join(lines)


def rerender(path: str) -> str:
    """Markdown again from a results JSON (after the report format changed)."""
    import json
    from pathlib import Path

    data = json.loads(Path(path).read_text())
    text = markdown(data["runs"], data["meta"])
    if data.get("client_check"):
        from bench.sidebyside import clientcheck

        text += "\n" + clientcheck.markdown(data["client_check"])
    return text + f"\nTotal time: {data['meta']['elapsed_s']} s\n"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    for arg in sys.argv[1:]:
        Path(arg).with_suffix(".md").write_text(rerender(arg))
        print(f"rewrote {Path(arg).with_suffix('.md')}")
