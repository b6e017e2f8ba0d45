"""Command line for the development Kafka broker: ``kqs kafka fetch|start|stop|status``.

``add_kafka_subcommands`` hangs these under an existing argparse parser (the ``kqs`` CLI).
Each subcommand sets ``func`` to a handler that takes the parsed namespace and returns an
exit code, so the caller ends with ``return args.func(args)``; a BrokerError is reported as
one line on stderr with exit code 1. ``python -m topology.embedded.broker_cli start`` etc. runs the
same commands standalone.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from topology.embedded import broker, jars
from topology.embedded.errors import BrokerError

DEFAULT_DATA_DIR = Path("data/kafka")

Handler = Callable[[argparse.Namespace], int]


def add_kafka_subcommands(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``kafka`` with its four subcommands to ``subparsers``; returns the ``kafka`` parser."""
    kafka = subparsers.add_parser(
        "kafka",
        help="run a local single-node Kafka broker (jars from Maven Central, no Docker)",
        description="Run a local single-node Kafka broker (jars from Maven Central, no Docker).",
    )
    commands = kafka.add_subparsers(dest="kafka_command", metavar="COMMAND", required=True)

    fetch = commands.add_parser("fetch", help=f"download Kafka {jars.KAFKA_VERSION} jars (once)")
    _add_cache_dir(fetch)
    fetch.set_defaults(func=_guarded(_cmd_fetch))

    start = commands.add_parser("start", help="start the broker in the background")
    _add_data_dir(start)
    start.add_argument("--host", default=broker.DEFAULT_HOST, help="listen address (%(default)s)")
    start.add_argument("--port", type=int, default=broker.DEFAULT_PORT, help="(%(default)s)")
    start.add_argument(
        "--controller-port",
        type=int,
        default=broker.DEFAULT_CONTROLLER_PORT,
        help="KRaft controller port (%(default)s)",
    )
    start.add_argument("--heap", default=broker.DEFAULT_HEAP, help="JVM -Xmx (%(default)s)")
    start.add_argument(
        "--flush-every-message",
        action="store_true",
        help="fsync every append to every topic (broker-wide); kqs serve fsyncs the topics "
        "that hold a durable record without it",
    )
    _add_cache_dir(start)
    start.set_defaults(func=_guarded(_cmd_start))

    stop = commands.add_parser("stop", help="stop the broker")
    _add_data_dir(stop)
    stop.add_argument(
        "--timeout",
        type=float,
        default=broker.DEFAULT_STOP_TIMEOUT,
        help="seconds to wait before SIGKILL (%(default)s)",
    )
    stop.set_defaults(func=_guarded(_cmd_stop))
    # `kqs serve --data-dir D` keeps its broker in D/kafka: stop and status take either.

    status = commands.add_parser("status", help="show whether the broker runs (exit 3 if not)")
    _add_data_dir(status)
    status.set_defaults(func=_guarded(_cmd_status))
    return kafka


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="broker state, logs and topic data (%(default)s)",
    )


def _add_cache_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where the jars are kept ($KQS_CACHE_DIR or ~/.cache/kqs)",
    )


def _cmd_fetch(args: argparse.Namespace) -> int:
    home = jars.fetch(args.cache_dir)
    _out(f"kafka {jars.KAFKA_VERSION} jars in {home / 'libs'}")
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    info = broker.start(
        args.data_dir,
        args.port,
        args.controller_port,
        args.host,
        flush_every_message=args.flush_every_message,
        heap=args.heap,
        cache_dir=args.cache_dir,
    )
    state = "started" if info.started else "already running"
    _out(f"kafka broker {state} (pid {info.pid}), bootstrap: {info.bootstrap}")
    _out(f"log: {info.log_file}")
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    stopped = broker.stop(broker_dir(args.data_dir), timeout=args.timeout)
    _out("kafka broker stopped" if stopped else "kafka broker was not running")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    st = broker.status(broker_dir(args.data_dir))
    if not st.running:
        _out(f"kafka broker not running (data dir {st.data_dir})")
        return 3  # like `systemctl status`: scripts can test for "not running"
    _out(f"kafka broker running (pid {st.pid}), bootstrap: {st.bootstrap}")
    _out(f"data dir: {st.data_dir}")
    if st.owner_pid is None:
        _out("owner: none (started by `kqs kafka start`; stop it with `kqs kafka stop`)")
    elif st.owner_alive:
        _out(f"owner: pid {st.owner_pid} (`kqs serve`), which stops it when it exits")
    else:
        _out(
            f"owner: pid {st.owner_pid}, gone; the next `kqs serve` of this data dir adopts "
            "it and stops it at exit (or: `kqs kafka stop`)"
        )
    _out(f"log: {st.log_file}")
    return 0


def broker_dir(data_dir: Path) -> Path:
    """The broker's own directory: ``data_dir`` itself, or ``data_dir/kafka`` when given the
    data dir of ``kqs serve`` (whose embedded broker lives there)."""
    if not (data_dir / "broker.json").exists() and (data_dir / "kafka" / "broker.json").exists():
        return data_dir / "kafka"
    return data_dir


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _guarded(handler: Handler) -> Handler:
    """Wrap ``handler`` so a BrokerError becomes a one-line message and exit code 1."""

    def run(args: argparse.Namespace) -> int:
        # Progress ("resolving ... (first time only)") is logged by the library; make sure
        # the user sees it even if the calling CLI configured no logging.
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
        try:
            return handler(args)
        except BrokerError as exc:
            sys.stderr.write(f"kqs kafka: error: {exc}\n")
            return 1

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topology.embedded.broker_cli")
    # add_kafka_subcommands is shaped for the `kqs` CLI; standalone, use the `kafka`
    # parser's own subcommands at top level.
    root = parser.add_subparsers(dest="command", required=True)
    add_kafka_subcommands(root)
    args = parser.parse_args(["kafka", *(argv if argv is not None else sys.argv[1:])])
    handler: Handler = args.func
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
