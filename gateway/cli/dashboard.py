"""`kqs dashboard`: serve the live dashboard on its own (`kqs analytics` starts it too)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

from dashboard.messages import GatewayClient
from dashboard.server import DEFAULT_PORT, run_dashboard
from gateway.common.config import Settings
from gateway.observability import logs
from topology import client_properties
from topology.embedded import broker

log = logging.getLogger("kqs.dashboard")


def add_dashboard_subcommand(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    defaults = Settings()
    parser = subparsers.add_parser(
        "dashboard",
        help="serve the live queue and DLQ dashboard (http://127.0.0.1:9325/)",
        description="Serve a web page of live per-queue metrics and DLQ analytics, read from "
        "the topics the `kqs analytics` Spark jobs write (__kqs_metrics, "
        "__kqs_dlq_analytics) and the gateway's __kqs_events gauges.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="HTTP port (%(default)s)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=defaults.data_dir,
        help="the gateway's data directory, to find its embedded broker",
    )
    parser.add_argument(
        "--kafka-bootstrap",
        default=defaults.kafka_bootstrap,
        help="Kafka cluster (default: KQS_KAFKA_BOOTSTRAP, else the embedded broker of "
        "<data-dir>/kafka)",
    )
    parser.add_argument(
        "--gateway-url",
        default=os.environ.get("KQS_DASHBOARD_GATEWAY_URL", f"http://127.0.0.1:{defaults.port}"),
        help="the gateway the message list browses and replays through, signed with the "
        "AWS credentials of the environment, an administrator's to see every account's "
        "queues (default: KQS_DASHBOARD_GATEWAY_URL, else %(default)s)",
    )
    logs.add_log_format_argument(parser, defaults.log_format)
    parser.set_defaults(func=run)
    return parser


def dashboard_bootstrap(configured: str, data_dir: Path) -> str:
    """The cluster to read: the one configured, else the embedded broker of `data_dir`.

    With neither running yet, the embedded broker's default address: the feed keeps trying,
    so the dashboard may be started before `kqs serve`.
    """
    if configured:
        return configured
    settings = replace(Settings(), data_dir=data_dir)
    status = broker.status(settings.kafka_dir)
    if status.running and status.bootstrap:
        return status.bootstrap
    fallback = f"127.0.0.1:{settings.kafka_port}"
    log.warning(
        "no embedded broker running yet; waiting for one",
        extra={"kafka_dir": str(settings.kafka_dir), "bootstrap": fallback},
    )
    return fallback


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_format)
    try:
        # KQS_KAFKA_CONFIG and KQS_KAFKA_*: the secured cluster's client properties.
        properties = client_properties.load()
    except client_properties.ClientPropertiesError as error:
        sys.stderr.write(f"kqs dashboard: {error}\n")
        return 2
    configured = args.kafka_bootstrap or properties.bootstrap
    bootstrap = dashboard_bootstrap(configured, args.data_dir)
    client_properties.use(bootstrap, properties)
    try:
        gateway = GatewayClient.from_environment(args.gateway_url) if args.gateway_url else None
        return run_dashboard(bootstrap, args.host, args.port, gateway)
    except OSError as error:  # the port is taken, or the address is not this machine's
        sys.stderr.write(f"kqs dashboard: cannot listen on {args.host}:{args.port}: {error}\n")
        return 1
