"""Regenerate docs/dashboard.png: the dashboard over 45 realistic minutes, in headless chromium.

The script starts its own broker (jar) on free ports under a temporary directory, writes
`tests/dashboard_builders.sample_traffic` (three queues, two dead-letter queues, records in the
fixed `__kqs_metrics` / `__kqs_dlq_analytics` / `__kqs_events` schemas) to topics of its own,
serves the dashboard on a free port, waits until it has read them all, and screenshots it.

    .venv/bin/python bench/dashboard_screenshot.py [--out docs/dashboard.png] [--keep-open]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard.feed import Topics
from dashboard.server import DashboardServer
from tests.support.browser import find_chromium, screenshot
from tests.support.dashboard_builders import create_topics, produce, sample_traffic, summary_when
from tests.support.harness import free_port
from topology.embedded import broker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/dashboard.png"))
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1400)
    parser.add_argument(
        "--keep-open", action="store_true", help="keep serving after the screenshot (Ctrl-C)"
    )
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        sys.stderr.write("no chromium found: apt-get install -y chromium\n")
        return 1
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(
        metrics=f"shot-metrics-{suffix}",
        dlq_analytics=f"shot-dlq-{suffix}",
        events=f"shot-events-{suffix}",
    )
    with tempfile.TemporaryDirectory(prefix="kqs-dashboard-shot-") as work:
        data_dir = Path(work) / "kafka"
        info = broker.start(data_dir, port=free_port(), controller_port=free_port())
        try:
            create_topics(info.bootstrap, topics)
            records = sample_traffic(topics, time.time_ns() // 1_000_000)
            produce(info.bootstrap, records)
            gauges = sum(1 for topic, _, _ in records if topic == topics.events)
            with DashboardServer(info.bootstrap, port=free_port(), topics=topics) as server:
                summary_when(
                    server,
                    lambda s: sum(s["feed"]["records"].values()) == len(records),
                    timeout_s=120,
                )
                args.out.parent.mkdir(parents=True, exist_ok=True)
                screenshot(chromium, server.url, args.out.resolve(), args.width, args.height)
                print(f"{len(records)} records ({gauges} gauge samples) -> {args.out}")
                if args.keep_open:
                    print(f"serving {server.url}; Ctrl-C to stop")
                    try:
                        while True:
                            time.sleep(3600)
                    except KeyboardInterrupt:
                        pass
        finally:
            broker.stop(data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
