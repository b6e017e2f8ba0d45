"""The `kqs` command: `kqs serve`, `kqs kafka fetch|start|stop|status`, `kqs analytics`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp import web_app as aiohttp_web_app

from gateway.app import build_app, receipt_secret
from gateway.cli import collector
from gateway.cli.analytics import add_analytics_subcommand
from gateway.cli.dashboard import add_dashboard_subcommand
from gateway.cli.inspect import add_inspect_subcommand
from gateway.cli.replay import add_replay_subcommands
from gateway.cluster.group_check import SHARED_CLUSTER_EXIT, SharedCluster
from gateway.cluster.hand_over import retire_worker_copies
from gateway.cluster.workers import cpu_count, die_with_supervisor, run_workers, worker_index
from gateway.common.config import Settings, kafka_client_properties, use_kafka_client_properties
from gateway.http.lean_http import LeanFront
from gateway.http.pipeline import drain, lean_front
from gateway.http.tls import TlsConfigError, peer_client_context, server_context
from gateway.iam.config import ConfigError, Directory, load_directory
from gateway.observability import logs
from topology.client_properties import ClientProperties, ClientPropertiesError
from topology.embedded.broker import DEFAULT_HEAP, EmbeddedBroker
from topology.embedded.broker_cli import add_kafka_subcommands
from topology.embedded.broker_config import log_dir
from topology.embedded.errors import BrokerError
from topology.encryption.keys import MASTER_KEY_FILE, create_master_key_file

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
        "--kafka-config",
        default=defaults.kafka_config,
        metavar="FILE",
        help="Kafka client properties (TLS, SASL) for every Kafka client, as Kafka's tools take "
        "--command-config (KQS_KAFKA_CONFIG; KQS_KAFKA_* settings override its security keys)",
    )
    serve.add_argument(
        "--tls-cert",
        default=defaults.tls_cert,
        metavar="FILE",
        help="serve HTTPS with this PEM certificate chain (KQS_TLS_CERT; needs --tls-key)",
    )
    serve.add_argument(
        "--tls-key", default=defaults.tls_key, metavar="FILE", help="its PEM key (KQS_TLS_KEY)"
    )
    serve.add_argument(
        "--tls-peer-ca",
        default=defaults.tls_peer_ca,
        metavar="FILE",
        help="with HTTPS and several gateways, the PEM CA certificates that signed the other "
        "gateways' certificates (KQS_TLS_PEER_CA; default: the system's CAs and --tls-cert)",
    )
    serve.add_argument(
        "--http-port",
        type=int,
        default=defaults.http_port,
        help="with HTTPS, also answer plain HTTP on this port (KQS_HTTP_PORT; default none)",
    )
    serve.add_argument(
        "--iam-config",
        default=defaults.iam_config,
        help="TOML file of accounts, users, groups and policies (KQS_IAM_CONFIG)",
    )
    serve.add_argument(
        "--master-key-file",
        default=defaults.master_key_file,
        help="master key of encryption at rest (KQS_MASTER_KEY_FILE; default with the embedded "
        "broker and no --kms-key-id: <data-dir>/master.key, made on first start)",
    )
    serve.add_argument(
        "--no-master-key",
        action="store_true",
        default=defaults.no_master_key,
        help="with the embedded broker, make no master key: messages are stored in clear text "
        "and queues report SqsManagedSseEnabled false (KQS_NO_MASTER_KEY=1)",
    )
    serve.add_argument(
        "--kms-key-id",
        default=defaults.kms_key_id,
        help="an AWS KMS key (id, ARN or alias; KQS_KMS_KEY_ID): queues' KmsMasterKeyIds are "
        "KMS keys, and SQS-managed encryption uses this one without a master key file; the "
        "usual AWS settings (AWS_REGION, credentials, AWS_ENDPOINT_URL_KMS) reach KMS",
    )
    serve.add_argument(
        "--workers",
        default=os.environ.get("KQS_WORKERS", "1"),
        help="gateway processes sharing the port and the queue partitions, or 'auto' for one "
        "per core (KQS_WORKERS; default 1: see README, 'Cluster profile')",
    )
    # Set by `--workers` on the processes it starts (gateway/cluster/workers.py).
    serve.add_argument("--pool-worker", action="store_true", help=argparse.SUPPRESS)
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
                f"{settings.scheme}://{settings.host}:{settings.port} sqs list-queues",
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


async def _run_gateway(settings: Settings, directory: Directory, pool_worker: bool) -> None:
    private: socket.socket | None = None
    if pool_worker:
        # The port is shared by every worker; the others reach this one on a port of its own.
        private = _private_socket(settings.host)
        settings = replace(settings, advertised_url=_private_url(settings, private))
    app = build_app(settings, directory=directory)
    # `drain` waits for the requests being handled; the runner's own wait only covers those
    # that started in the instant between the two.
    runner = web.AppRunner(app, shutdown_timeout=5)
    await runner.setup()
    listening = await _listen(app, runner, settings, private, reuse_port=pool_worker)
    log.info(
        "listening",
        extra={
            "endpoint": f"{settings.scheme}://{settings.host}:{settings.port}",
            **(
                {"http": f"http://{settings.host}:{settings.http_port}"}
                if settings.http_port
                else {}
            ),
            "account": settings.account_id,
            **({"internal": settings.advertised_url} if pool_worker else {}),
        },
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    began = time.monotonic()
    log.info("shutting down: draining requests")
    await listening.stop_accepting()  # the listening sockets close first: no new connections
    unfinished = await drain(app, DRAIN_TIMEOUT_S)
    if unfinished:
        log.warning(
            "requests still running after the drain timeout", extra={"requests": unfinished}
        )
    listening.close_connections()
    await runner.cleanup()
    log.info("shut down", extra={"seconds": round(time.monotonic() - began, 3)})


HTTP_FRONTS = ("lean", "aiohttp")  # KQS_HTTP_FRONT: gateway/http/lean_http.py, or aiohttp's server


class _Listening:
    """The sockets the gateway accepts connections on, through either HTTP front."""

    def __init__(
        self, sites: list[web.BaseSite], servers: list[asyncio.Server], front: LeanFront | None
    ) -> None:
        self._sites, self._servers, self._front = sites, servers, front

    async def stop_accepting(self) -> None:
        for site in self._sites:
            await site.stop()
        for server in self._servers:
            server.close()

    def close_connections(self) -> None:
        """After the drain (the aiohttp front's connections close with its runner)."""
        if self._front is not None:
            self._front.close_idle()


async def _listen(
    app: web.Application,
    runner: web.AppRunner,
    settings: Settings,
    private: socket.socket | None,
    reuse_port: bool,
) -> _Listening:
    # HTTPS on the main port (and the workers' private ones) when configured; `http_port`
    # answers plain HTTP beside it.
    tls = server_context(settings.tls_cert, settings.tls_key) if settings.tls else None
    plain_port = settings.http_port if tls is not None else 0
    if settings.http_front == "lean":
        front = lean_front(app)
        loop = asyncio.get_running_loop()
        servers = [
            await loop.create_server(
                front.protocol, settings.host, settings.port, reuse_port=reuse_port or None, ssl=tls
            )
        ]
        if private is not None:
            servers.append(await loop.create_server(front.protocol, sock=private, ssl=tls))
        if plain_port:
            servers.append(
                await loop.create_server(
                    front.protocol, settings.host, plain_port, reuse_port=reuse_port or None
                )
            )
        log.info("HTTP front", extra={"front": "lean"})
        return _Listening([], servers, front)
    sites: list[web.BaseSite] = [
        web.TCPSite(runner, settings.host, settings.port, reuse_port=reuse_port, ssl_context=tls)
    ]
    if private is not None:
        sites.append(web.SockSite(runner, private, ssl_context=tls))
    if plain_port:
        sites.append(web.TCPSite(runner, settings.host, plain_port, reuse_port=reuse_port))
    for site in sites:
        await site.start()
    return _Listening(sites, [], None)


def _private_socket(host: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def _private_url(settings: Settings, private: socket.socket) -> str:
    """Where the other gateways reach this worker: the advertised host (KQS_ADVERTISED_URL)
    or the listening one, on the worker's own port."""
    port = private.getsockname()[1]
    if settings.advertised_url:
        parts = urlsplit(settings.advertised_url)
        return f"{parts.scheme}://{parts.hostname}:{port}"
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"{settings.scheme}://{host}:{port}"


def _worker_count(value: str) -> int:
    if value == "auto":
        return cpu_count()
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"--workers {value!r}: give a number of processes (1 or more) or 'auto'")
    return count


def _worker_args(args: argparse.Namespace) -> list[str]:
    """The options of this `kqs serve` that every worker takes as they are."""
    passed = ["--log-format", args.log_format]
    if args.iam_config:
        passed += ["--iam-config", args.iam_config]
    if args.accept_any_access_key:
        passed.append("--accept-any-access-key")
    for option in ("kafka_config", "tls_cert", "tls_key", "tls_peer_ca"):
        if getattr(args, option):
            passed += [f"--{option.replace('_', '-')}", getattr(args, option)]
    if args.http_port:
        passed += ["--http-port", str(args.http_port)]
    return passed


def _secured(settings: Settings) -> tuple[Settings, ClientProperties]:
    """The Kafka client properties (and the cluster a properties file names), and a check of
    the HTTPS certificate, before anything starts."""
    settings, properties = kafka_client_properties(settings)
    if properties.values and not settings.kafka_bootstrap:
        raise ClientPropertiesError(
            "Kafka client properties are given but no cluster: set --kafka-bootstrap "
            "(KQS_KAFKA_BOOTSTRAP) or bootstrap.servers in the properties file (the embedded "
            "broker is plaintext)"
        )
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise TlsConfigError("--tls-cert and --tls-key go together (KQS_TLS_CERT, KQS_TLS_KEY)")
    if settings.tls:
        server_context(settings.tls_cert, settings.tls_key)
        peer_client_context(settings.tls_cert, settings.tls_peer_ca)
    elif settings.tls_peer_ca:
        raise TlsConfigError("--tls-peer-ca (KQS_TLS_PEER_CA) is for gateways serving HTTPS")
    return settings, properties


def serve(args: argparse.Namespace) -> int:
    settings = replace(
        Settings(),
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        kafka_bootstrap=args.kafka_bootstrap,
        kafka_config=args.kafka_config,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_peer_ca=args.tls_peer_ca,
        http_port=args.http_port,
        iam_config=args.iam_config,
        accept_any_access_key=args.accept_any_access_key,
        log_format=args.log_format,
        master_key_file=args.master_key_file,
        kms_key_id=args.kms_key_id,
        no_master_key=args.no_master_key,
    )
    if args.pool_worker:
        logs.configure(settings.log_format, context={"worker": worker_index()})
        die_with_supervisor()
    else:
        logs.configure(settings.log_format)
    if settings.http_front not in HTTP_FRONTS:
        sys.stderr.write(
            f"kqs: KQS_HTTP_FRONT is {settings.http_front!r}; use one of {', '.join(HTTP_FRONTS)}\n"
        )
        return 2
    if settings.no_master_key and (settings.master_key_file or settings.kms_key_id):
        sys.stderr.write(
            "kqs: --no-master-key goes with neither --master-key-file nor --kms-key-id\n"
        )
        return 2
    try:
        workers = 1 if args.pool_worker else _worker_count(str(args.workers))
        directory = load_directory(
            settings.iam_config, settings.account_id, settings.accept_any_access_key
        )
        settings, kafka_properties = _secured(settings)
    except (ConfigError, ClientPropertiesError, TlsConfigError) as error:
        sys.stderr.write(f"kqs: {error}\n")
        return 2
    # Before any Kafka client is made (the embedded broker needs none: it is plaintext).
    use_kafka_client_properties(settings, kafka_properties)
    if not args.pool_worker:
        _announce_credentials(settings, directory)
        if kafka_properties.values:
            log.info("Kafka client properties", extra=kafka_properties.summary())
    if workers == 1 and settings.partition_ownership == "all":
        retire_worker_copies(settings)
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
            settings = _with_own_master_key(settings)
            if settings.topic_fsync and settings.segment_sync_dir is None:
                # Same machine, same file system: the gateway syncs the queue topics' segments
                # itself, cheaper than the broker's flush (topology/segment_sync.py).
                settings = replace(settings, segment_sync_dir=log_dir(settings.kafka_dir))
        if workers > 1:
            return run_workers(settings, workers, receipt_secret(settings), _worker_args(args))
        collector.tune_for_serving()
        try:
            _run(_run_gateway(settings, directory, args.pool_worker))
        except SharedCluster as error:
            log.error("refusing to start", extra={"reason": str(error)})
            sys.stderr.write(f"kqs: {error}\n")
            return SHARED_CLUSTER_EXIT
        _free_gateway()
    return 0


def _with_own_master_key(settings: Settings) -> Settings:
    """With the embedded broker and no master key given: the data directory's own, made on
    first start, so that queues are encrypted as they say (gateway/sqs/encryption.py). Against
    a cluster KQS makes none: every gateway of a deployment needs the same key. With a KMS key
    neither: SQS-managed encryption uses it; nor when told not to (`--no-master-key`)."""
    if settings.master_key_file or settings.kms_key_id or settings.no_master_key:
        return settings
    path = settings.data_dir / MASTER_KEY_FILE
    if create_master_key_file(path):
        log.info("master key made for encryption at rest; keep a copy", extra={"path": str(path)})
    return replace(settings, master_key_file=str(path))


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
    """Run the gateway on uvloop when it is installed (measured faster: bench/results/archive/
    profile-journal.md, 2026-11-22 (ec8dca0)), else on asyncio's own loop; `KQS_EVENT_LOOP=asyncio` forces the latter."""
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
    add_replay_subcommands(subparsers)
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
