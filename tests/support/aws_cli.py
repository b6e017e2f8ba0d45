"""The AWS CLI of the test extra, run as a user runs it against a gateway: the local
credentials (`test` / `test`), none of the machine's configuration files, JSON output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AWS = Path(sys.executable).with_name("aws")


def run_aws(endpoint: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`aws --endpoint-url ENDPOINT --output json ARGS...`; the caller judges the outcome."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    return subprocess.run(
        [str(AWS), "--endpoint-url", endpoint, "--output", "json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
