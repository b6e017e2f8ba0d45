"""What a forwarded call raises: `OwnerGone` (tried again at the partition's next owner) when
the owner let the partition go or cannot be reached, and the owner's own SQS or lease-store
error, which stands, when it answered. A real aiohttp server plays the owner."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from gateway.cluster.forwarding import PATH, Forwarder, encode_error, encode_lease_error
from gateway.common.errors import OwnerGone, ReceiptHandleIsInvalid, ServiceUnavailable
from lease_store.errors import MessageNotInflight
from topology.owners import Owner

Answer = Callable[[], web.Response]


@pytest.fixture
async def owner_answering() -> AsyncIterator[Callable[[Answer], Any]]:
    """Start an owner whose internal channel answers every call with `answer()`."""
    runners: list[web.AppRunner] = []

    async def start(answer: Answer) -> Owner:
        async def handle(request: web.Request) -> web.Response:
            return answer()

        app = web.Application()
        app.router.add_post(PATH + "{operation}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return Owner("owner", f"http://127.0.0.1:{port}")

    yield start
    for runner in runners:
        await runner.cleanup()


def a_closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def deleting_through(owner: Owner) -> bool:
    forwarder = Forwarder(b"secret")
    try:
        return await forwarder.delete(owner, "kqs.000000000000.q.ab", "handle")
    finally:
        await forwarder.close()


async def test_an_owner_that_no_longer_serves_the_partition_is_gone(
    owner_answering: Callable[[Answer], Any],
) -> None:
    owner = await owner_answering(lambda: web.json_response({"message": "no"}, status=409))
    with pytest.raises(OwnerGone) as raised:
        await deleting_through(owner)
    assert raised.value.owner == owner


async def test_an_owner_that_cannot_be_reached_is_gone() -> None:
    owner = Owner("owner", f"http://127.0.0.1:{a_closed_port()}")
    with pytest.raises(OwnerGone) as raised:
        await deleting_through(owner)
    assert raised.value.owner == owner


async def test_an_owner_that_lost_the_partition_while_confirming_is_gone(
    owner_answering: Callable[[Answer], Any],
) -> None:
    moved = OwnerGone("This queue partition moved to another gateway during the request.")
    owner = await owner_answering(lambda: web.json_response(encode_error(moved)))
    with pytest.raises(OwnerGone) as raised:
        await deleting_through(owner)
    assert raised.value.owner == owner  # the one that answered, whom the retry avoids
    assert raised.value.removed is None


async def test_an_owner_gone_says_which_message_it_removed_before_it_learned(
    owner_answering: Callable[[Answer], Any],
) -> None:
    moved = OwnerGone("This queue partition moved to another gateway during the request.")
    moved.removed = "m-1"
    owner = await owner_answering(lambda: web.json_response(encode_error(moved)))
    with pytest.raises(OwnerGone) as raised:
        await deleting_through(owner)
    assert (raised.value.owner, raised.value.removed) == (owner, "m-1")


@pytest.mark.parametrize(
    ("answer", "removed"), [({"removed": True}, True), ({"removed": False}, False), ({}, True)]
)
async def test_a_delete_answers_whether_the_owner_removed_the_message(
    owner_answering: Callable[[Answer], Any], answer: dict[str, Any], removed: bool
) -> None:
    # ({}: an owner of a version before the answer said it, which counted its removals)
    owner = await owner_answering(lambda: web.json_response(answer))
    assert await deleting_through(owner) is removed


@pytest.mark.parametrize(
    ("answer", "raised"),
    [
        (encode_lease_error(MessageNotInflight("not in flight")), MessageNotInflight),
        (encode_error(ReceiptHandleIsInvalid.for_handle("handle")), ReceiptHandleIsInvalid),
        (encode_error(ServiceUnavailable("Kafka did not answer.")), ServiceUnavailable),
    ],
)
async def test_an_error_the_owner_answered_is_its_own_and_not_gone(
    owner_answering: Callable[[Answer], Any], answer: dict[str, Any], raised: type[Exception]
) -> None:
    owner = await owner_answering(lambda: web.json_response(answer))
    with pytest.raises(raised) as caught:
        await deleting_through(owner)
    assert not isinstance(caught.value, OwnerGone)
