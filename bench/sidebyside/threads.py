"""Where a backlog's CPU goes, thread by thread: fill N messages, then drain them.

    .venv/bin/python -m bench.sidebyside.threads --messages 100000 [--base-src DIR] [--rounds 3]
        [--spy-drain stacks.txt] [--spy-fill stacks.txt]

Starts `kqs serve` (this tree, or the source tree `--base-src`) pinned to core 1 with the
shipped durable defaults, fills a queue with SendMessageBatch from 32 clients on core 0, waits
until all of it is visible, drains it with ReceiveMessage (10, 1 s long poll) and
DeleteMessageBatch from 32 clients, and prints for each phase the rate and the server's CPU per
message by thread (`/proc/<pid>/task/*/stat` of the gateway and its broker JVM, read before
and after the phase), e.g. the event loop (`MAIN`), librdkafka's threads (`rdk:*`), the
broker's data plane and JIT compilers. With `--rounds` the fill and drain repeat in the same
server (a new queue each round), which shows what a longer-lived broker does.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.sidebyside import servers, workloads
from bench.sidebyside.loadgen import Client
from bench.sidebyside.profile import summarize
from topology.admin import TopicAdmin

CLIENTS = 32
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")

Ticks = dict[tuple[int, int], tuple[str, int]]  # (pid, tid) -> (thread name, utime + stime)


def server_pids(server: servers.Server, work: Path) -> list[int]:
    """The processes of `kqs serve` started in `work`: the gateway's tree and the broker JVM
    (in a process group of its own, so found by its pid file)."""
    pids = [process.pid for process in server.tree()]
    broker_pid = work / "data" / "kafka" / "broker.pid"
    if broker_pid.exists():
        pids.append(int(broker_pid.read_text()))
    return sorted(set(pids))


def thread_ticks(pids: list[int]) -> Ticks:
    out: Ticks = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue  # the thread ended
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            out[(pid, int(task.name))] = (name, int(fields[11]) + int(fields[12]))
    return out


# Internal topics whose records a phase is charged with, besides the queue topic's own.
_COUNTED_TOPICS = ("__kqs_leases", "__kqs_events")


async def topic_ends(
    admin: TopicAdmin, topics: tuple[str, ...] = _COUNTED_TOPICS
) -> dict[str, int]:
    """Each topic's log end offset summed over its partitions: how many records it took."""
    return {
        topic: sum(await admin.end_offsets(topic, admin.partition_count(topic))) for topic in topics
    }


def report_records(
    label: str, before: dict[str, int], after: dict[str, int], messages: int
) -> None:
    print(
        f"   {label}: Kafka records per message, "
        + ", ".join(f"{t} {(after[t] - before[t]) / messages:.2f}" for t in after)
    )


def report(label: str, before: Ticks, after: Ticks, seconds: float, messages: int) -> None:
    by_thread: collections.Counter[tuple[int, str]] = collections.Counter()
    for (pid, tid), (name, ticks) in after.items():
        spent = ticks - before.get((pid, tid), (name, 0))[1]
        if spent:
            by_thread[(pid, "MAIN" if pid == tid else name)] += spent
    total = sum(by_thread.values())
    print(
        f"== {label}: {messages} messages in {seconds:.1f} s = {messages / seconds:,.0f} msg/s; "
        f"server CPU {total / _TICKS_PER_S:.2f} s = {total * 1e6 / _TICKS_PER_S / messages:.0f} "
        "µs per message"
    )
    for (pid, name), spent in by_thread.most_common(10):
        print(
            f"   {pid:>8} {name:<20} {spent / _TICKS_PER_S:6.2f} s {100 * spent / total:5.1f} % "
            f"{spent * 1e6 / _TICKS_PER_S / messages:6.0f} µs per message"
        )


@contextlib.contextmanager
def spying(target: tuple[int, Path] | None, wall: bool = False) -> Iterator[None]:
    """py-spy on the process `target` names, on the thread holding the GIL (the event loop,
    mostly), while the block runs: its top frames printed, its stacks appended to the path."""
    if target is None:
        yield
        return
    pid, keep = target
    work = Path(tempfile.mkdtemp(prefix="kqs-spy-"))
    out = work / "stacks.txt"
    command = [str(servers.VENV_BIN / "py-spy"), "record", "--pid", str(pid)]
    # --spy-wall: every thread, on CPU or waiting (a blocking call on the event loop shows
    # as time there); by default only the thread holding the GIL, on CPU.
    command += ["--idle", "--threads"] if wall else ["--gil"]
    command += ["--format", "raw", "--rate", "200", "--nonblocking", "--output", str(out)]
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its stacks on SIGINT
        spy.wait(timeout=60)
        print(summarize(out))
        with keep.open("a") as kept:
            kept.write(out.read_text())
        shutil.rmtree(work, ignore_errors=True)


async def one_round(
    client: Client,
    pids: list[int],
    messages: int,
    name: str,
    admin: TopicAdmin,
    spy_drain: tuple[int, Path] | None = None,  # (the gateway's pid, where stacks go)
    spy_fill: tuple[int, Path] | None = None,
    spy_wall: bool = False,
) -> None:
    url = await client.create_queue(name)
    batches = iter(range(messages // 10))
    sent = 0

    async def fill() -> None:
        nonlocal sent
        for _ in batches:
            accepted = await workloads.send_batch(client, url, 10)
            sent += accepted  # not `sent += await ...`: that reads `sent` before awaiting

    records = await topic_ends(admin)
    with spying(spy_fill, spy_wall):
        before, began = thread_ticks(pids), time.monotonic()
        await asyncio.gather(*(fill() for _ in range(CLIENTS)))
        report("fill", before, thread_ticks(pids), time.monotonic() - began, sent)
    for _ in range(1200):  # the backlog counted visible (ingested), within 10 minutes
        visible, _ = await client.count(url)
        if visible >= sent:
            break
        await asyncio.sleep(0.5)
    drained = 0

    async def drain() -> None:
        nonlocal drained
        while drained < sent:
            answer = await client.call(
                "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}
            )
            received = answer.get("Messages") or []
            if received:
                deleted = await workloads.delete_batch(client, url, received)
                drained += deleted

    await asyncio.sleep(1.0)  # the events' producer lingers up to 0.1 s after its hand-over
    filled = await topic_ends(admin)
    report_records("fill", records, filled, sent)
    with spying(spy_drain, spy_wall):
        before, began = thread_ticks(pids), time.monotonic()
        await asyncio.gather(*(drain() for _ in range(CLIENTS)))
        report("drain", before, thread_ticks(pids), time.monotonic() - began, drained)
    await asyncio.sleep(1.0)  # likewise the changelog's, handed over every 50 ms
    report_records("drain", filled, await topic_ends(admin), drained)


def broker_bootstrap(kafka_dir: Path) -> str:
    """The embedded broker's client listener, from the configuration it was started with."""
    for line in (kafka_dir / "server.properties").read_text().splitlines():
        if line.startswith("advertised.listeners="):
            return line.split("//", 1)[1].split(",", 1)[0].replace("\\:", ":")
    raise RuntimeError(f"no advertised.listeners in {kafka_dir / 'server.properties'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base-src", type=Path, help="run `kqs serve` of this source tree")
    parser.add_argument("--spy-drain", type=Path, help="append the drains' py-spy stacks here")
    parser.add_argument("--spy-fill", type=Path, help="append the fills' py-spy stacks here")
    parser.add_argument(
        "--spy-wall",
        action="store_true",
        help="py-spy every thread, waiting ones too (where the event loop blocks)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kqs-threads-"))
    server = servers.start_kqs(work, [1], {}, args.base_src)
    try:
        os.sched_setaffinity(0, {0})
        pids = server_pids(server, work)
        bootstrap = broker_bootstrap(work / "data" / "kafka")

        admin = TopicAdmin(bootstrap)

        async def run() -> None:
            async with Client(server.endpoint, 2 * CLIENTS) as client:
                for index in range(args.rounds):
                    await one_round(
                        client,
                        pids,
                        args.messages,
                        f"threads-{index}",
                        admin,
                        (server.proc.pid, args.spy_drain) if args.spy_drain else None,
                        (server.proc.pid, args.spy_fill) if args.spy_fill else None,
                        args.spy_wall,
                    )

        asyncio.run(run())
    finally:
        servers.stop(server)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
