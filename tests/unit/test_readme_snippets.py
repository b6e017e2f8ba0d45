"""The client snippets of README's "Connect from…" and docs/CLIENTS.md are copied verbatim from
code the client tests run.

Each snippet in those pages follows a line ``<!-- snippet: PATH NAME -->``; in PATH, the lines
between the comments ``README: begin NAME`` and ``README: end NAME`` (dedented) must equal
the snippet's code block exactly, so a README example cannot drift from what is tested.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SNIPPET = re.compile(r"<!-- snippet: (\S+) (\S+) -->\n```\w*\n(.*?)```", re.S)
EXPECTED = {
    "java-sync-client",
    "java-async-batch",
    "jms",
    "java-extended-client",
    "celery",
    "python-asyncio",
    "python-extended-client",
    "node-client",
    "node-consumer",
    "go-client",
    "python-fifo",
}


def marked_region(path: Path, name: str) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    begin = [i for i, line in enumerate(lines) if line.strip().endswith(f"README: begin {name}")]
    end = [i for i, line in enumerate(lines) if line.strip().endswith(f"README: end {name}")]
    assert len(begin) == 1 and len(end) == 1 and begin[0] < end[0], f"{path}: markers of {name}"
    return textwrap.dedent("\n".join(lines[begin[0] + 1 : end[0]])).strip("\n") + "\n"


def test_readme_snippets_are_copied_from_tested_code() -> None:
    pages = [REPO / "README.md", REPO / "docs" / "CLIENTS.md"]
    found = [s for page in pages for s in SNIPPET.findall(page.read_text(encoding="utf-8"))]
    assert {name for _, name, _ in found} == EXPECTED
    for path, name, block in found:
        assert block == marked_region(REPO / path, name), f"snippet {name} != {path}"
