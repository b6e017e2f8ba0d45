"""The internal channel between gateways over HTTPS (`kqs serve --tls-cert`): whom a gateway
trusts (`peer_client_context`: its own certificate file, `--tls-peer-ca`, the system's CAs),
and the error that names an untrusted certificate instead of "could not be reached". A real
aiohttp server with certificates made here plays the other gateway."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.cluster.forwarding import PATH, Forwarder
from gateway.common.errors import OwnerGone
from gateway.http.tls import TlsConfigError, peer_client_context, server_context
from tests.support.certificates import CertificateAuthority, Pem
from topology.owners import Owner

StartOwner = Callable[[Pem, str], Any]


@pytest.fixture
async def owner_serving() -> AsyncIterator[StartOwner]:
    """Start another gateway's internal channel on HTTPS with `pem`, advertised at `host`;
    every delete it is asked for removes a message."""
    runners: list[web.AppRunner] = []

    async def start(pem: Pem, host: str) -> Owner:
        async def handle(request: web.Request) -> web.Response:
            return web.json_response({"removed": True})

        app = web.Application()
        app.router.add_post(PATH + "{operation}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        tls = server_context(str(pem.cert), str(pem.key))
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls).start()
        port = runner.addresses[0][1]
        return Owner("other", f"https://{host}:{port}")

    yield start
    for runner in runners:
        await runner.cleanup()


async def delete_through(owner: Owner, own_cert: Path, peer_ca: Path | None = None) -> bool:
    forwarder = Forwarder(b"secret", peer_client_context(str(own_cert), str(peer_ca or "")))
    try:
        return await forwarder.delete(owner, "kqs.000000000000.q.ab", "handle")
    finally:
        await forwarder.close()


async def test_gateways_sharing_one_certificate_trust_each_other(
    owner_serving: StartOwner, tmp_path: Path
) -> None:
    shared = CertificateAuthority(tmp_path / "ca").pem("gateways", ("127.0.0.1",), server=True)
    owner = await owner_serving(shared, "127.0.0.1")
    assert await delete_through(owner, shared.cert) is True


async def test_a_private_ca_given_as_peer_ca_vouches_for_each_gateways_own_certificate(
    owner_serving: StartOwner, tmp_path: Path
) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    theirs, mine = (ca.pem(name, ("127.0.0.1",), server=True) for name in ("a", "b"))
    owner = await owner_serving(theirs, "127.0.0.1")
    assert await delete_through(owner, mine.cert, peer_ca=ca.cert) is True


async def test_an_untrusted_certificate_is_named_in_the_error_and_the_log(
    owner_serving: StartOwner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given another gateway whose certificate another CA signed than this one's
    theirs = CertificateAuthority(tmp_path / "their-ca").pem("a", ("127.0.0.1",), server=True)
    mine = CertificateAuthority(tmp_path / "my-ca").pem("b", ("127.0.0.1",), server=True)
    owner = await owner_serving(theirs, "127.0.0.1")
    # when a delete is forwarded to it
    with caplog.at_level(logging.ERROR, "kqs.forwarding"), pytest.raises(OwnerGone) as gone:
        await delete_through(owner, mine.cert)
    # then the error says why, and the log says what to change
    assert "its HTTPS certificate is not trusted here" in gone.value.message
    assert "unable to get local issuer certificate" in gone.value.message
    (record,) = [r for r in caplog.records if "certificate is not trusted" in r.getMessage()]
    assert "KQS_TLS_PEER_CA" in record.getMessage()
    assert record.__dict__["endpoint"] == owner.endpoint


async def test_a_certificate_not_naming_the_advertised_host_is_named_in_the_error(
    owner_serving: StartOwner, tmp_path: Path
) -> None:
    # A certificate for `localhost` only, the gateway advertised at 127.0.0.1.
    only_localhost = CertificateAuthority(tmp_path / "ca").pem("a", ("localhost",), server=True)
    owner = await owner_serving(only_localhost, "127.0.0.1")
    with pytest.raises(OwnerGone) as gone:
        await delete_through(owner, only_localhost.cert)
    assert "address mismatch" in gone.value.message
    assert "'127.0.0.1'" in gone.value.message


def test_a_peer_ca_file_that_is_no_certificate_is_refused_naming_the_option(
    tmp_path: Path,
) -> None:
    own = CertificateAuthority(tmp_path / "ca").pem("a", ("127.0.0.1",), server=True)
    not_pem = tmp_path / "peer-ca.pem"
    not_pem.write_text("not a certificate\n")
    with pytest.raises(TlsConfigError, match="--tls-peer-ca .*peer-ca.pem"):
        peer_client_context(str(own.cert), str(not_pem))
