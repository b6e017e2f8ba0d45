"""`kqs replay` and `kqs peek`: a queue's log replayed, a queue browsed, from the command line.

Both are clients of a running gateway: they call its StartMessageReplayTask,
ListMessageReplayTasks, CancelMessageReplayTask and PeekMessages actions through botocore
(`sqs_model.py`), which signs with the usual AWS credentials (the environment, a profile,
...). The endpoint is `--endpoint-url`, else AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL, else
the queue URL's own scheme and host.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

POLL_S = 0.5
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])(?:\s*ago)?$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
PREVIEW = 60


def parse_time(text: str, now_s: float | None = None) -> int:
    """Epoch milliseconds of a time given as ISO 8601 (`2026-12-02T04:00:00Z`; no zone:
    UTC), epoch seconds or milliseconds, or a duration ago (`90s`, `15m`, `2h`, `1d`)."""
    text = text.strip()
    now_s = time.time() if now_s is None else now_s
    relative = _RELATIVE.match(text)
    if relative:
        return int((now_s - float(relative.group(1)) * _UNIT_S[relative.group(2)]) * 1000)
    if text.isdigit():
        number = int(text)
        return number if number >= 100_000_000_000 else number * 1000  # ms, else seconds
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: ISO 8601, epoch seconds or ms, or e.g. 15m / 2h ago"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def parse_offsets(text: str) -> dict[str, str]:
    """`0=120,1=98`: partition -> offset."""
    out: dict[str, str] = {}
    for item in text.split(","):
        partition, _, offset = item.partition("=")
        if not (partition.strip().isdigit() and offset.strip().isdigit()):
            raise argparse.ArgumentTypeError(f"{text!r}: give PARTITION=OFFSET[,...]")
        out[partition.strip()] = offset.strip()
    return out


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _endpoint(args: argparse.Namespace, queue_url: str | None) -> str | None:
    if args.endpoint_url:
        return str(args.endpoint_url)
    for name in ("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return os.environ[name]
    if queue_url:
        parts = urlsplit(queue_url)
        if parts.scheme and parts.netloc:
            return f"{parts.scheme}://{parts.netloc}"
    return None


def _client(args: argparse.Namespace, queue_url: str | None) -> Any:
    # Imported here: botocore's session is heavy, and `kqs serve` never needs it.
    from botocore.config import Config

    from gateway.cli.sqs_model import kqs_session

    session = kqs_session()
    region = args.region or session.get_config_variable("region") or "us-east-1"
    return session.create_client(
        "sqs",
        endpoint_url=_endpoint(args, queue_url),
        region_name=region,
        config=Config(retries={"max_attempts": 3}),
    )


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _fail(text: str) -> int:
    sys.stderr.write(f"kqs: {text}\n")
    return 1


def _task_line(task: dict[str, Any]) -> str:
    done = task.get("ApproximateNumberOfMessagesReplayed", 0)
    total = task.get("ApproximateNumberOfMessagesToReplay", 0)
    line = f"{task['Status']:<10} {done}/{total} replayed, started {iso(task['StartedTimestamp'])}"
    line += f" -> {task.get('DestinationArn', '')}"
    if "FailureReason" in task:
        line += f" ({task['FailureReason']})"
    if task["Status"] == "RUNNING":
        line += f"\n           handle {task['TaskHandle']}"
    return line


def replay(args: argparse.Namespace) -> int:
    try:
        if args.cancel:
            client = _client(args, args.queue_url)
            answer = client.cancel_message_replay_task(TaskHandle=args.cancel)
            _out(f"cancelled; {answer['ApproximateNumberOfMessagesReplayed']} replayed")
            return 0
        if not args.queue_url:
            return _fail("replay: give QUEUE_URL (or --cancel HANDLE)")
        client = _client(args, args.queue_url)
        if args.list:
            tasks = client.list_message_replay_tasks(QueueUrl=args.queue_url).get("Tasks", [])
            for task in tasks:
                _out(_task_line(task))
            if not tasks:
                _out("no replay tasks")
            return 0
        return _start_and_follow(client, args)
    except ClientError as error:
        return _fail(f"{error.response['Error']['Code']}: {error.response['Error']['Message']}")
    except BotoCoreError as error:
        return _fail(str(error))


def _start_and_follow(client: Any, args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"QueueUrl": args.queue_url}
    if args.offsets is not None:
        request["StartOffsets"] = args.offsets
        if args.end_offsets is not None:
            request["EndOffsets"] = args.end_offsets
    elif args.since is not None:
        request["SinceTimestamp"] = args.since
        if args.until is not None:
            request["UntilTimestamp"] = args.until
    else:
        return _fail("replay: give --since TIME (or --offsets P=O,...)")
    if args.to:
        request["DestinationQueueUrl"] = args.to
    if args.rate:
        request["MaxNumberOfMessagesPerSecond"] = args.rate
    started = client.start_message_replay_task(**request)
    handle = started["TaskHandle"]
    total = started.get("ApproximateNumberOfMessagesToReplay", 0)
    _out(f"replay task started: {total} messages in range; handle {handle}")
    if args.no_wait:
        return 0
    last = -1
    began = time.monotonic()
    try:
        while True:
            tasks = client.list_message_replay_tasks(QueueUrl=args.queue_url).get("Tasks", [])
            task = next((t for t in tasks if t.get("TaskHandle") == handle), None)
            if task is None:
                return _fail(f"replay task {handle} is no longer listed")
            done = task.get("ApproximateNumberOfMessagesReplayed", 0)
            if done != last:
                elapsed = max(time.monotonic() - began, 1e-6)
                _out(f"  {done}/{total} replayed ({done / elapsed:.0f}/s)")
                last = done
            if task["Status"] not in ("RUNNING", "CANCELLING"):
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        client.cancel_message_replay_task(TaskHandle=handle)
        _out("interrupted: task cancelled")
        return 130
    _out(f"{task['Status'].lower()}: {done} messages replayed")
    return 0 if task["Status"] == "COMPLETED" else 1


def peek(args: argparse.Namespace) -> int:
    client = _client(args, args.queue_url)
    request: dict[str, Any] = {
        "QueueUrl": args.queue_url,
        "Order": "newest" if args.newest else "oldest",
        "BodyPreviewLength": PREVIEW,
    }
    if args.status:
        request["Statuses"] = [s.upper().replace("-", "_") for s in args.status]
    shown: list[dict[str, Any]] = []
    try:
        while len(shown) < args.limit:
            request["MaxNumberOfMessages"] = min(100, args.limit - len(shown))
            page = client.peek_messages(**request)
            shown.extend(page.get("Messages", []))
            if "NextToken" not in page:
                break
            request["NextToken"] = page["NextToken"]
    except ClientError as error:
        return _fail(f"{error.response['Error']['Code']}: {error.response['Error']['Message']}")
    except BotoCoreError as error:
        return _fail(str(error))
    if args.json:
        _out(
            json.dumps(
                {
                    "Messages": shown,
                    "OldestAvailableTimestamp": page.get("OldestAvailableTimestamp"),
                    "MessageRetentionPeriod": page.get("MessageRetentionPeriod"),
                },
                indent=2,
            )
        )
        return 0
    retention_s = page.get("MessageRetentionPeriod", 0)
    topic = page.get("TopicRetentionMs")
    topic_text = f"; the topic keeps records {topic} ms" if topic is not None else ""
    _out(
        f"retention {retention_s} s ({retention_s / 86400:.2f} days){topic_text}; a replay can "
        f"reach back to {iso(page['OldestAvailableTimestamp'])}"
    )
    _out(f"{'sent':<20} {'status':<9} {'rc':>3} {'message id':<36}  body")
    for message in shown:
        attributes = message.get("Attributes", {})
        status = attributes.get("KqsStatus", "?")
        if status == "IN_FLIGHT" and "KqsVisibleAtTimestamp" in attributes:
            status += f" until {iso(int(attributes['KqsVisibleAtTimestamp']))}"
        body = message.get("Body", "").replace("\n", " ")
        _out(
            f"{iso(int(attributes.get('SentTimestamp', 0))):<20} {status:<9} "
            f"{attributes.get('ApproximateReceiveCount', '-'):>3} {message['MessageId']:<36}  "
            f"{body[:PREVIEW]}"
        )
    _out(f"{len(shown)} messages")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", help="the gateway (default: the queue URL's host)")
    parser.add_argument("--region", help="the signing region (default: the AWS configuration's)")


def add_replay_subcommands(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="re-send what a queue's log holds in a time range, deleted or not",
        description="Start a message replay task on the gateway and follow it: the messages "
        "the queue's Kafka log holds from --since (to --until) are sent again, as new "
        "messages, to the queue itself or to --to. TIME: ISO 8601 (UTC unless a zone is "
        "given), epoch seconds or ms, or a duration ago such as 15m, 2h, 1d.",
    )
    parser.add_argument("queue_url", nargs="?", metavar="QUEUE_URL")
    parser.add_argument("--since", type=parse_time, metavar="TIME")
    parser.add_argument("--until", type=parse_time, metavar="TIME")
    parser.add_argument(
        "--offsets", type=parse_offsets, metavar="P=O,...", help="start at these Kafka offsets"
    )
    parser.add_argument("--end-offsets", type=parse_offsets, metavar="P=O,...")
    parser.add_argument("--to", metavar="QUEUE_URL", help="destination (default: the queue)")
    parser.add_argument("--rate", type=int, metavar="N", help="at most N messages a second")
    parser.add_argument("--no-wait", action="store_true", help="start the task and return")
    parser.add_argument("--list", action="store_true", help="the queue's recent replay tasks")
    parser.add_argument("--cancel", metavar="HANDLE", help="cancel a running task")
    _common(parser)
    parser.set_defaults(func=replay)

    peek_parser = subparsers.add_parser(
        "peek",
        help="show a queue's messages without receiving them",
        description="Browse a queue's messages (its Kafka log and their lease state) without "
        "receiving, leasing or deleting any, and show how far back a replay can reach.",
    )
    peek_parser.add_argument("queue_url", metavar="QUEUE_URL")
    peek_parser.add_argument(
        "--status",
        action="append",
        choices=["visible", "in-flight", "delayed", "deleted", "unknown"],
        help="only messages in this state (repeatable)",
    )
    peek_parser.add_argument("--limit", type=int, default=20, metavar="N", help="(%(default)s)")
    peek_parser.add_argument("--newest", action="store_true", help="newest first")
    peek_parser.add_argument("--json", action="store_true", help="print the messages as JSON")
    _common(peek_parser)
    peek_parser.set_defaults(func=peek)


def main(argv: list[str]) -> int:
    """`kqs replay ...` or `kqs peek ...` alone (`entry.py`), without the gateway's imports."""
    parser = argparse.ArgumentParser(prog="kqs")
    add_replay_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))
