"""``kqs analytics``: the Spark jobs (local[2]) and the dashboard; ``fetch``: resolve their jars.

Nothing here imports pyspark at import time, so the ``kqs`` command starts fast and works
without the ``analytics`` extra installed until these subcommands are used.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from spark_streaming.settings import AnalyticsSettings, add_run_arguments, settings_from
from topology import client_properties

log = logging.getLogger("kqs.analytics")


def add_analytics_subcommand(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    analytics = subparsers.add_parser(
        "analytics",
        help="run the Spark analytics (metrics, DLQ) on __kqs_events (local[2] by default)",
        description="Run the Spark Structured Streaming analytics: per-queue CloudWatch "
        "metrics and DLQ analytics from __kqs_events, to Kafka topics and Parquet files.",
    )
    add_run_arguments(analytics, master_default="local[2]")
    analytics.add_argument(
        "--log-format",
        choices=("auto", "text", "json"),
        default=os.environ.get("KQS_LOG_FORMAT", "auto"),
        help="text (readable), json (one object per line), or auto: text on a terminal, "
        "else json ($KQS_LOG_FORMAT, default %(default)s)",
    )
    analytics.add_argument(
        "--dashboard-port",
        type=int,
        default=9325,
        help="serve the dashboard on this port (%(default)s); 0 = no dashboard",
    )
    analytics.set_defaults(func=_cmd_run)
    commands = analytics.add_subparsers(dest="analytics_command", metavar="COMMAND")
    fetch = commands.add_parser(
        "fetch",
        help="download Spark's Kafka connector jars (once); prints them comma-separated",
    )
    fetch.set_defaults(func=_cmd_fetch)
    return analytics


def _progress_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)


def _embedded_or_configured_bootstrap(args: argparse.Namespace) -> str:
    if args.bootstrap:
        return str(args.bootstrap)
    from topology.embedded import broker

    status = broker.status(Path(args.data_dir) / "kafka")
    if status.running and status.bootstrap:
        return status.bootstrap
    return AnalyticsSettings().bootstrap


def _pyspark_missing() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        sys.stderr.write(
            "kqs analytics: PySpark is not installed; install the analytics extra "
            "(scripts/analytics does it, or: pip install -e '.[analytics]')\n"
        )
        return True
    return False


def _cmd_fetch(args: argparse.Namespace) -> int:
    if _pyspark_missing():
        return 1
    from spark_streaming import jars

    _progress_logging()
    try:
        resolved = jars.fetch()
    except jars.JarsError as error:
        sys.stderr.write(f"kqs analytics: error: {error}\n")
        return 1
    sys.stdout.write(",".join(str(jar) for jar in resolved) + "\n")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    if _pyspark_missing():
        return 1
    from gateway.observability import logs
    from spark_streaming import jars, jobs

    logs.configure(args.log_format)
    # py4j announces its callback server (the batch listener's channel) at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        properties = client_properties.load(args.kafka_config)
    except client_properties.ClientPropertiesError as error:
        sys.stderr.write(f"kqs analytics: error: {error}\n")
        return 2
    args.bootstrap = args.bootstrap or properties.bootstrap
    args.bootstrap = _embedded_or_configured_bootstrap(args)
    settings = settings_from(args)
    client_properties.use(settings.bootstrap, settings.kafka_properties)  # the dashboard's feed
    try:
        resolved = jars.fetch()
    except jars.JarsError as error:
        sys.stderr.write(f"kqs analytics: error: {error}\n")
        return 1
    with contextlib.ExitStack() as stack:
        if args.dashboard_port:
            # The dashboard is its own package; it reads the topics these jobs write.
            from dashboard.server import DashboardServer

            try:
                server = stack.enter_context(
                    DashboardServer(args.bootstrap, port=args.dashboard_port)
                )
            except OSError as error:
                sys.stderr.write(
                    f"kqs analytics: dashboard cannot listen on port {args.dashboard_port}: "
                    f"{error} (use --dashboard-port)\n"
                )
                return 1
            log.info("dashboard", extra={"url": server.url})
        return jobs.run(settings, resolved, args.master)
