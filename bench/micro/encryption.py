"""What encryption at rest costs per message: sealing at send, opening at receive.

    .venv/bin/python -m bench.micro.encryption [--messages 20000] [--rounds 5]

Times `seal_message` and `open_message` (topology/encryption/messages.py) on one thread, for
1 KB and 64 KB bodies, without and with two message attributes, with the data key in use
(a queue's key is reused for its reuse period, so no key provider call per message). Prints
CPU µs per message (median of the rounds). The whole request path with encryption on and off
is `bench.micro` run with and without KQS_MASTER_KEY_FILE.
"""

from __future__ import annotations

import argparse
import statistics
import time

from lease_store.clock import SystemClock
from lease_store.records import AttributeValue, StoredMessage
from topology.encryption.data_keys import DataKeys
from topology.encryption.keys import FileKeyProvider
from topology.encryption.messages import open_message, seal_message

ATTRIBUTES = {
    "kind": AttributeValue("String", string_value="order-created"),
    "tenant": AttributeValue("Number", string_value="42"),
}


def _round(keys: DataKeys, message: StoredMessage, n: int) -> tuple[float, float]:
    key = keys.for_sealing("bench", None, 300)
    start = time.process_time()
    sealed = [seal_message(message, keys, key) for _ in range(n)]
    sealing = time.process_time() - start
    start = time.process_time()
    for one in sealed:
        open_message(one, keys)
    opening = time.process_time() - start
    return sealing / n * 1e6, opening / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    keys = DataKeys(FileKeyProvider([bytes(range(32))]), SystemClock())
    print("| body | attributes | seal µs/msg | open µs/msg |")
    print("|---|---|---|---|")
    for size in (1024, 65536):
        for attributes in ({}, ATTRIBUTES):
            message = StoredMessage("id", b"x" * size, 1, attributes=attributes, sender_id="AIDA")
            n = args.messages if size == 1024 else max(1, args.messages // 16)
            _round(keys, message, min(n, 1000))  # warm-up
            rounds = [_round(keys, message, n) for _ in range(args.rounds)]
            seal = statistics.median(r[0] for r in rounds)
            opened = statistics.median(r[1] for r in rounds)
            print(f"| {size // 1024} KB | {len(attributes)} | {seal:.2f} | {opened:.2f} |")


if __name__ == "__main__":
    main()
