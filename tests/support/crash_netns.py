"""A gateway on a network island: a Linux network namespace of its own, joined to the rest of
the machine by two veth links, so that a test can drop its link to the brokers and the other
gateways while it keeps running and its clients still reach it (the crash suite's network
cut: a switch port or a cable failing between one gateway's machine and the cluster).

    cluster link   root 10.213.N.1  <->  island 10.213.N.2   brokers and peers, both ways
    client link    root 10.214.N.1  <->  island 10.214.N.2   the island gateway's clients

The brokers and the other gateways listen on 10.213.N.1 (an address of the root namespace,
reachable from it as any local address); the island's gateway listens on every address of its
namespace and advertises 10.213.N.2 to its peers. `cut()` sets the island's end of the cluster
link down: its packets to the brokers and peers fail at once (no route), and theirs to it are
dropped on the way (the root end has no carrier), so their requests time out. `restore()`
sets it up again. Needs root (CAP_NET_ADMIN) and `ip` (iproute2); `unavailable()` says why not.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)


def unavailable() -> str | None:
    """Why an island cannot be made here (None: it can)."""
    probe = f"kqsprobe{random.randrange(10**6)}"
    try:
        made = _ip("netns", "add", probe)
    except FileNotFoundError:
        return "no `ip` command (iproute2)"
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


@dataclass
class Island:
    """One network namespace with its two links (`create`, then `destroy`)."""

    number: int  # N in the addresses and names above

    @classmethod
    def pick(cls) -> Island:
        """An island whose names and addresses nothing on the machine uses yet."""
        taken = _ip("-o", "addr").stdout + _ip("netns", "list").stdout
        for _ in range(100):
            number = random.randrange(1, 255)
            if f"10.213.{number}." not in taken and f"kqs{number}isl" not in taken:
                return cls(number)
        raise RuntimeError("no free island address in 10.213.0.0/16")

    @property
    def name(self) -> str:
        return f"kqs{self.number}isl"

    @property
    def cluster_host(self) -> str:
        """Where the brokers and the other gateways listen (root namespace)."""
        return f"10.213.{self.number}.1"

    @property
    def peer_host(self) -> str:
        """The island gateway's address on the cluster link (advertised to its peers)."""
        return f"10.213.{self.number}.2"

    @property
    def client_host(self) -> str:
        """Where the island gateway's clients reach it (the client link)."""
        return f"10.214.{self.number}.2"

    @property
    def wrap(self) -> list[str]:
        """The command that runs a process on the island."""
        return ["ip", "netns", "exec", self.name]

    def _links(self) -> list[tuple[str, str, int]]:
        # (root end, island end, second octet of the addresses)
        return [
            (f"k{self.number}r", f"k{self.number}i", 213),
            (f"c{self.number}r", f"c{self.number}i", 214),
        ]

    def create(self) -> None:
        commands = [["netns", "add", self.name], ["-n", self.name, "link", "set", "lo", "up"]]
        for root_end, island_end, octet in self._links():
            commands += [
                [
                    "link",
                    "add",
                    root_end,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    island_end,
                    "netns",
                    self.name,
                ],
                ["addr", "add", f"10.{octet}.{self.number}.1/24", "dev", root_end],
                ["link", "set", root_end, "up"],
                [
                    "-n",
                    self.name,
                    "addr",
                    "add",
                    f"10.{octet}.{self.number}.2/24",
                    "dev",
                    island_end,
                ],
                ["-n", self.name, "link", "set", island_end, "up"],
            ]
        for command in commands:
            done = _ip(*command)
            if done.returncode != 0:
                self.destroy()
                raise RuntimeError(f"ip {' '.join(command)}: {done.stderr.strip()}")

    def cut(self) -> None:
        self._set_cluster_link("down")

    def restore(self) -> None:
        self._set_cluster_link("up")

    def _set_cluster_link(self, state: str) -> None:
        island_end = self._links()[0][1]
        done = _ip("-n", self.name, "link", "set", island_end, state)
        assert done.returncode == 0, done.stderr

    def destroy(self) -> None:
        """Remove the links (deleting one end of a veth removes both) and the namespace."""
        for root_end, _, _ in self._links():
            _ip("link", "del", root_end)
        _ip("netns", "del", self.name)
