"""A/B of the request-path microbenchmark: this tree against another source tree, or this
tree against itself with settings changed for "this" side (`--this-env`).

    .venv/bin/python -m bench.micro.ab --base-src /tmp/kqs-base [--pairs 3] [--out ab-micro-<name>]
    .venv/bin/python -m bench.micro.ab --this-env KQS_MASTER_KEY_FILE=/tmp/master.key

The base tree is e.g. `git archive <commit> | tar -x -C /tmp/kqs-base` of a commit that has
`bench/micro` (this branch on). Each pair runs `python -m bench.micro` once with the base tree
first on PYTHONPATH and once with this tree, alternating which goes first, each in its own
process with the same virtualenv; the figure per (store, protocol, action) is the ratio
this/base of the median CPU µs per request within each pair, and the median of those ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"
HERE = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument(
        "--base-src", type=Path, default=HERE, help="source tree of the 'before' (this tree)"
    )
    p.add_argument(
        "--this-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable set for the 'this' runs only (repeatable), e.g. "
        "KQS_MASTER_KEY_FILE=... for encryption on against off",
    )
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--iterations", type=int, default=1000, help="requests per action per run")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--stores", default="rocksdb,memory")
    p.add_argument("--protocols", default="json,query")
    p.add_argument("--out", help="write bench/results/<out>.md and .json")
    return p


def _one(
    src: Path, args: argparse.Namespace, out: Path, extra_env: dict[str, str]
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "bench.micro",
        "--iterations",
        str(args.iterations),
        "--rounds",
        "1",
        "--warmup",
        str(args.warmup),
        "--stores",
        args.stores,
        "--protocols",
        args.protocols,
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(src), **extra_env}
    subprocess.run(cmd, cwd=src, env=env, check=True, stdout=subprocess.DEVNULL, timeout=3600)
    data: dict[str, Any] = json.loads(out.with_suffix(".json").read_text())
    return data


def compare(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per (store, protocol, action): base and this CPU µs p50 per pair, ratios, median."""

    def rows(data: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
        return {(r["store"], r["protocol"], r["action"]): r for r in data["rows"]}

    first = rows(pairs[0][1])
    out = []
    for key in first:
        base = [rows(b)[key]["cpu_us_p50"] for b, _ in pairs if key in rows(b)]
        this = [rows(t)[key]["cpu_us_p50"] for _, t in pairs]
        if len(base) != len(this):
            continue  # an action the base tree does not measure
        ratios = [round(t / b, 3) for b, t in zip(base, this, strict=True)]
        out.append(
            {
                "store": key[0],
                "protocol": key[1],
                "action": key[2],
                "base_cpu_us_p50": base,
                "this_cpu_us_p50": this,
                "ratio_per_pair": ratios,
                "ratio_median": round(statistics.median(ratios), 3),
                # The lowest run of each side: a run's median moves up, never down, when the
                # machine is busy, and on a noisy VM whole runs shift by up to 2x.
                "ratio_of_lowest": round(min(this) / min(base), 3),
            }
        )
    return out


def markdown(table: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Request-path microbenchmark A/B (in process, gateway only)",
        "",
        f"- this: {meta['this']}; base: {meta['base']}",
        f"- {meta['pairs']} alternating pairs of {meta['iterations']} requests per action; "
        f"load average (1 min) {meta['load_before']} before, {meta['load_after']} after",
        "",
        "| action | store / protocol | base CPU µs p50 per pair | this CPU µs p50 per pair "
        "| this/base per pair | median | lowest this / lowest base |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['action']} | {r['store']} / {r['protocol']} "
            f"| {', '.join(f'{v:,.0f}' for v in r['base_cpu_us_p50'])} "
            f"| {', '.join(f'{v:,.0f}' for v in r['this_cpu_us_p50'])} "
            f"| {', '.join(f'{v:.2f}' for v in r['ratio_per_pair'])} | **{r['ratio_median']:.2f}** "
            f"| {r['ratio_of_lowest']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    base_src = args.base_src.resolve()
    if not (base_src / "bench" / "micro" / "__main__.py").is_file():
        raise SystemExit(f"{base_src} has no bench/micro: the base must be this branch or later")
    this_env = dict(item.split("=", 1) for item in args.this_env)
    load_before = round(os.getloadavg()[0], 2)
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="kqs-micro-ab-") as tmp:
        for pair in range(1, args.pairs + 1):
            order = [("base", base_src), ("this", HERE)]
            if pair % 2 == 0:
                order.reverse()  # neither tree always runs first
            got: dict[str, dict[str, Any]] = {}
            for name, src in order:
                print(f"pair {pair}: {name} ({src})", file=sys.stderr)
                env = this_env if name == "this" else {}
                got[name] = _one(src, args, Path(tmp) / f"{name}-{pair}", env)
            pairs.append((got["base"], got["this"]))
    table = compare(pairs)
    meta = {
        "this": pairs[0][1]["meta"]["commit"]
        + (f" with {' '.join(args.this_env)}" if args.this_env else ""),
        "base": f"{base_src} ({pairs[0][0]['meta']['commit']})",
        "pairs": args.pairs,
        "iterations": args.iterations,
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
    }
    text = markdown(table, meta)
    print(text)
    if args.out:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{args.out}.md").write_text(text)
        (RESULTS / f"{args.out}.json").write_text(
            json.dumps({"meta": meta, "rows": table}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
