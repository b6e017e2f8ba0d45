"""``kqs analytics``: run the Spark jobs locally; ``kqs analytics fetch``: resolve their jars.

Nothing here imports pyspark at import time, so the ``kqs`` command starts fast and works
without the ``analytics`` extra installed until these subcommands are used.
"""

from __future__ import annotations

import argparse
import logging
import sys


def add_analytics_subcommand(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    from spark_streaming.settings import add_run_arguments

    analytics = subparsers.add_parser(
        "analytics",
        help="run the Spark analytics (metrics, DLQ) on __kqs_events (local[2] by default)",
        description="Run the Spark Structured Streaming analytics: per-queue CloudWatch "
        "metrics and DLQ analytics from __kqs_events, to Kafka topics and Parquet files.",
    )
    add_run_arguments(analytics, master_default="local[2]")
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


def _cmd_fetch(args: argparse.Namespace) -> int:
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
    from spark_streaming import jars, jobs
    from spark_streaming.settings import settings_from

    _progress_logging()
    try:
        resolved = jars.fetch()
    except jars.JarsError as error:
        sys.stderr.write(f"kqs analytics: error: {error}\n")
        return 1
    return jobs.run(settings_from(args), resolved, args.master)
