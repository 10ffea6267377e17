"""Where local jobs serve their metrics for Prometheus: free ports from a range.

Each local job runs its own Flink MiniCluster, so each needs its own port for Flink's
Prometheus reporter (modstream/jobs/runtime.py). The demo gives every job one from
MODSTREAM_METRICS_PORT (default 9250-9299, the range deploy/prometheus/prometheus.yml
scrapes) and prints where they are.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import urllib.request

METRICS_PORTS = "9250-9299"  # local jobs: the first free one (modstream/jobs/runtime.py)
CLUSTER_METRICS_PORTS = "9300-9309"  # the session cluster's JobManager and TaskManagers
PROMETHEUS_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"


def port_range(spec: str) -> range:
    """ "A-B" or "A" as a range of ports."""
    first, _, last = spec.partition("-")
    return range(int(first), int(last or first) + 1)


def free_ports(count: int, spec: str | None = None) -> list[int]:
    """`count` ports of the range (MODSTREAM_METRICS_PORT by default) nothing listens on."""
    spec = spec or os.environ.get("MODSTREAM_METRICS_PORT") or METRICS_PORTS
    found: list[int] = []
    for port in port_range(spec):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"metrics: fewer than {count} free ports in {spec}")


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}/metrics"


Sample = tuple[str, dict[str, str], float]  # (name, labels, value)
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition (comments and unreadable lines skipped)."""
    found: list[Sample] = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        found.append((name, dict(_LABEL.findall(labels or "")), number))
    return found


def scrape(port: int, timeout_s: float = 10.0) -> str | None:
    """The endpoint's text, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url(port), timeout=timeout_s) as response:
            return str(response.read().decode("utf-8"))
    except (OSError, ValueError, http.client.HTTPException):
        return None  # refused, reset, timed out (OSError), cut short (HTTPException), not text
