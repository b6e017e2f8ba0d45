"""A strict little reader of the Prometheus text exposition format 0.0.4, for tests.

Every line must be a `# HELP`, a `# TYPE` or a sample of the family the last `# TYPE`
announced (histograms: its `_bucket`, `_sum`, `_count`); anything else fails the test, so
the gateway's output is checked for shape as well as for values.
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass, field

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
Labels = frozenset[tuple[str, str]]


@dataclass
class Exposition:
    types: dict[str, str] = field(default_factory=dict)
    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; 0 when absent (a counter not yet moved)."""
        return self.samples.get(name, {}).get(frozenset(labels.items()), 0.0)

    def series(self, name: str) -> dict[Labels, float]:
        return self.samples.get(name, {})


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _labels(raw: str) -> Labels:
    pairs: list[tuple[str, str]] = []
    pos = 0
    while pos < len(raw):
        match = _LABEL.match(raw, pos)
        if match is None:
            raise ValueError(f"bad labels: {raw!r}")
        pairs.append((match.group(1), _unescape(match.group(2))))
        pos = match.end()
    if len({name for name, _ in pairs}) != len(pairs):
        raise ValueError(f"repeated label: {raw!r}")
    return frozenset(pairs)


def parse(text: str) -> Exposition:
    out = Exposition()
    family: str | None = None
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if kind not in _TYPES or name in out.types:
                raise ValueError(f"bad TYPE line: {line!r}")
            out.types[name] = kind
            family = name
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"bad sample line: {line!r}")
        name, _, raw_labels, raw_value = match.groups()
        allowed = {family}
        if family is not None and out.types[family] == "histogram":
            allowed = {f"{family}_bucket", f"{family}_sum", f"{family}_count"}
        if name not in allowed:
            raise ValueError(f"sample {name} outside its family ({family})")
        labels = _labels(raw_labels or "")
        series = out.samples.setdefault(name, {})
        if labels in series:
            raise ValueError(f"duplicate sample: {line!r}")
        series[labels] = float(raw_value)
    return out


def scrape(endpoint: str) -> Exposition:
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        assert response.status == 200
        content_type = response.headers["Content-Type"]
        assert content_type.startswith("text/plain; version=0.0.4"), content_type
        return parse(response.read().decode())
