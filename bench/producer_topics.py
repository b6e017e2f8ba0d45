"""What one produce costs as the number of topics a producer knows grows, with and without
sharding (`AsyncProducer(shards=...)`).

    .venv/bin/python -m bench.producer_topics [--topics 10000] [--shards 1,8] [--records 5000]

No broker is needed: the producer points at a closed local port, so records stay in
librdkafka's queue and only the client's own work is timed. librdkafka finds a topic's state
by walking its list of topics (in the order it first saw them) on every produce; the figures
are µs per `AsyncProducer.start` for the topic seen first, in the middle and last.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

from topology.producer import AsyncProducer

BODY = b"x" * 1024


async def _cost(producer: AsyncProducer, topic: str, records: int) -> float:
    began = time.perf_counter()
    for _ in range(records):
        producer.start(topic, BODY, key=b"k", headers=[("kqs.id", b"m")])
    return (time.perf_counter() - began) / records * 1e6


async def measure(topics: int, shards: int, records: int) -> dict[str, float]:
    names = [f"kqs.000000000000.q{i:05d}.{'ab' * 16}" for i in range(topics)]
    producer = AsyncProducer(
        "127.0.0.1:1",
        {"queue.buffering.max.messages": 2_000_000, "log_level": 0, "message.timeout.ms": 600_000},
        shards=shards,
    )
    for name in names:  # every topic known to its shard, in this order
        producer.start(name, b"")
    costs = {
        "first": await _cost(producer, names[0], records),
        "middle": await _cost(producer, names[topics // 2], records),
        "last": await _cost(producer, names[-1], records),
    }
    producer._stopping.set()  # no broker to flush to: just stop the poll threads
    return costs


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--topics", type=int, default=10_000)
    p.add_argument("--shards", default="1,8")
    p.add_argument("--records", type=int, default=5_000)
    args = p.parse_args()
    logging.getLogger("kqs").setLevel(logging.CRITICAL)
    print(f"µs per produce (1 KB record), {args.topics:,} topics known\n")
    print("| shards | first topic | middle topic | last topic |")
    print("|---|---|---|---|")
    for shards in (int(s) for s in args.shards.split(",")):
        c = asyncio.run(measure(args.topics, shards, args.records))
        print(f"| {shards} | {c['first']:.1f} | {c['middle']:.1f} | {c['last']:.1f} |")


if __name__ == "__main__":
    main()
