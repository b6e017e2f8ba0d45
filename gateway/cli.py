"""The `kqs` command: `kqs serve`, `kqs kafka fetch|start|stop|status`, `kqs analytics`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp import web_app as aiohttp_web_app

from dashboard.cli import add_dashboard_subcommand
from gateway import logs
from gateway.app import build_app, drain
from gateway.config import Settings
from gateway.iam.config import ConfigError, Directory, load_directory
from gateway.inspect_cli import add_inspect_subcommand
from spark_streaming.cli import add_analytics_subcommand
from topology.broker import DEFAULT_HEAP, BrokerError, EmbeddedBroker
from topology.broker_cli import add_kafka_subcommands

log = logging.getLogger("kqs.serve")

# How long a shutdown waits for the requests being handled (sends waiting for Kafka's
# acknowledgement: at most the producer's 15 s delivery timeout).
DRAIN_TIMEOUT_S = 30.0


def _serve_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    defaults = Settings()
    serve = subparsers.add_parser(
        "serve",
        help="run the SQS gateway (with an embedded Kafka broker unless KQS_KAFKA_BOOTSTRAP is set)",
    )
    serve.add_argument("--host", default=defaults.host, help="address to listen on")
    serve.add_argument("--port", type=int, default=defaults.port, help="HTTP port (default 9324)")
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=defaults.data_dir,
        help="lease store and embedded broker data",
    )
    serve.add_argument(
        "--kafka-bootstrap", default=defaults.kafka_bootstrap, help="use this Kafka cluster"
    )
    serve.add_argument(
        "--iam-config",
        default=defaults.iam_config,
        help="TOML file of accounts, users, groups and policies (KQS_IAM_CONFIG)",
    )
    logs.add_log_format_argument(serve, defaults.log_format)
    serve.add_argument(
        "--accept-any-access-key",
        action="store_true",
        default=defaults.accept_any_access_key,
        help="let unknown access keys act as the default account, unverified (local use only)",
    )


def _announce_credentials(settings: Settings, directory: Directory) -> None:
    if directory.embedded_default:
        log.info(
            "no IAM config (--iam-config / KQS_IAM_CONFIG): embedded default credentials",
            extra={
                "account": directory.default_account_id,
                "user": "access key test, secret test (sqs:* on the account's queues)",
                "admin": "access key admin, secret admin (also lists, deletes, purges all)",
                "usage": "AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test "
                "AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "
                f"http://{settings.host}:{settings.port} sqs list-queues",
            },
        )
    else:
        log.info(
            "IAM config loaded",
            extra={"path": settings.iam_config, "accounts": directory.account_ids()},
        )
    if directory.accept_any_access_key:
        log.warning(
            "ACCEPTING ANY ACCESS KEY: unknown access keys act as the default account with "
            "full rights and their signatures are NOT verified; never expose this gateway",
            extra={"account": directory.default_account_id},
        )


async def _run_gateway(settings: Settings, directory: Directory) -> None:
    app = build_app(settings, directory=directory)
    # `drain` waits for the requests being handled; the runner's own wait only covers those
    # that started in the instant between the two.
    runner = web.AppRunner(app, shutdown_timeout=5)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    log.info(
        "listening",
        extra={
            "endpoint": f"http://{settings.host}:{settings.port}",
            "account": settings.account_id,
        },
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    began = time.monotonic()
    log.info("shutting down: draining requests")
    await site.stop()  # the listening socket closes first: no new connections
    unfinished = await drain(app, DRAIN_TIMEOUT_S)
    if unfinished:
        log.warning(
            "requests still running after the drain timeout", extra={"requests": unfinished}
        )
    await runner.cleanup()
    log.info("shut down", extra={"seconds": round(time.monotonic() - began, 3)})


def serve(args: argparse.Namespace) -> int:
    settings = replace(
        Settings(),
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        kafka_bootstrap=args.kafka_bootstrap,
        iam_config=args.iam_config,
        accept_any_access_key=args.accept_any_access_key,
        log_format=args.log_format,
    )
    logs.configure(settings.log_format)
    try:
        directory = load_directory(
            settings.iam_config, settings.account_id, settings.accept_any_access_key
        )
    except ConfigError as error:
        sys.stderr.write(f"kqs: {error}\n")
        return 2
    _announce_credentials(settings, directory)
    with contextlib.ExitStack() as stack:
        if not settings.kafka_bootstrap:
            log.info("starting embedded Kafka broker", extra={"data_dir": str(settings.kafka_dir)})
            broker_info = stack.enter_context(
                EmbeddedBroker(
                    settings.kafka_dir,
                    port=settings.kafka_port,
                    controller_port=settings.kafka_controller_port,
                    heap=settings.broker_heap or DEFAULT_HEAP,
                )
            )
            settings = replace(settings, kafka_bootstrap=broker_info.bootstrap)
        _run(_run_gateway(settings, directory))
        _free_gateway()
    return 0


def _free_gateway() -> None:
    """Free the stopped gateway's objects, and with them its Kafka clients.

    librdkafka clients (the admin clients above all, which have no close()) disconnect only
    when their objects are freed. aiohttp caches each handler's middleware chain with its
    app in a module-level LRU cache, which keeps the whole gateway alive after it stopped;
    left there, its clients log "Connection refused" while the embedded broker shuts down.
    """
    cached = getattr(aiohttp_web_app, "_cached_build_middleware", None)
    cache_clear = getattr(cached, "cache_clear", None)
    if callable(cache_clear):
        cache_clear()
    gc.collect()


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run the gateway on uvloop when it is installed (measured faster: bench/results/
    PROFILE.md), else on asyncio's own loop; `KQS_EVENT_LOOP=asyncio` forces the latter."""
    if os.environ.get("KQS_EVENT_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            log.info("event loop", extra={"loop": "uvloop"})
            uvloop.run(main)
            return
    asyncio.run(main)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kqs", description="SQS-compatible queues on Apache Kafka"
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    _serve_parser(subparsers)
    add_kafka_subcommands(subparsers)
    add_inspect_subcommand(subparsers)
    add_analytics_subcommand(subparsers)
    add_dashboard_subcommand(subparsers)
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args)
        return int(args.func(args))
    except BrokerError as error:
        sys.stderr.write(f"kqs: {error}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
