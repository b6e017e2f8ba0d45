"""Client-tier fixtures: the S3 server the Extended Clients store large payloads in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3-compatible server (Versity S3 Gateway, posix backend) for the whole run."""
    from tests.support import clients_support

    if not clients_support.versitygw_built():
        clients_support.require_tool("go")
    with clients_support.s3_server(tmp_path_factory.mktemp("s3")) as endpoint:
        yield endpoint
